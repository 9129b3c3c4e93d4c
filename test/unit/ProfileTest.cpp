// fsdp-run --profile's work counts, against the formulas written out here
// by hand, and its summary by kernel.
#include "fsdpc/runtime/Profile.h"
#include "fsdpc/runtime/CpuDevice.h"
#include "fsdpc/runtime/Executor.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace fsdpc;
using namespace fsdpc::runtime;

namespace {

int addTensor(plan::PlanHeader &h, std::vector<int64_t> shape, plan::DType dtype = plan::F32) {
  plan::Tensor *t = h.add_tensors();
  t->set_name("t" + std::to_string(h.tensors_size()));
  t->set_dtype(dtype);
  int64_t n = 1;
  for (int64_t d : shape) {
    t->add_shape(d);
    n *= d;
  }
  t->set_bytes(n * (dtype == plan::F32 ? 4 : 2));
  t->set_kind(plan::TRANSIENT);
  t->set_region(plan::TRANSIENT_ARENA);
  t->set_init_section(-1);
  return h.tensors_size() - 1;
}

plan::Instruction *addInstruction(plan::PlanHeader &h, const char *op, std::vector<int> in, std::vector<int> out,
                                  plan::Stream stream = plan::COMPUTE) {
  return test::addPlanInstruction(h, op, in, out, stream);
}

TEST(Profile, GemmFlopsAreTwoMNKWhicheverOperandIsTransposed) {
  plan::PlanHeader h;
  const int a = addTensor(h, {5, 3}), at = addTensor(h, {3, 5}), b = addTensor(h, {3, 7}), c = addTensor(h, {5, 7});
  const int bias = addTensor(h, {7});
  const int a3 = addTensor(h, {2, 5, 3}), b3 = addTensor(h, {2, 3, 7}), c3 = addTensor(h, {2, 5, 7});
  const double mnk = 5.0 * 7.0 * 3.0;
  EXPECT_EQ(instructionFlops(h, *addInstruction(h, "matmul", {a, b}, {c})), 2 * mnk);
  plan::Instruction *transposed = addInstruction(h, "matmul_bias", {at, b, bias}, {c});
  (*transposed->mutable_int_attrs())["transpose_a"] = 1;
  EXPECT_EQ(instructionFlops(h, *transposed), 2 * mnk);
  EXPECT_EQ(instructionFlops(h, *addInstruction(h, "batch_matmul", {a3, b3}, {c3})), 2 * 2 * mnk);
  // Mixture of experts: 2 rows of [5, 3] by one of 4 experts' [3, 7]
  // matrices; the weights' gradient does the same products.
  const int experts = addTensor(h, {2}, plan::I64), weights = addTensor(h, {4, 3, 7});
  EXPECT_EQ(instructionFlops(h, *addInstruction(h, "expert_matmul", {a3, weights, experts}, {c3})), 2 * 2 * mnk);
  EXPECT_EQ(instructionFlops(h, *addInstruction(h, "expert_matmul_weight_grad", {a3, c3, experts}, {weights})),
            2 * 2 * mnk);
  // Other kernels are counted in bytes only: 4 (5 x 7) f32 elements read
  // twice and written once.
  plan::Instruction *add = addInstruction(h, "add", {c, c}, {c});
  EXPECT_EQ(instructionFlops(h, *add), 0);
  EXPECT_EQ(instructionBytes(h, *add), 3 * 35 * 4);
}

TEST(Profile, AttentionCountsTheScoresAndTheValueProductOfEveryPair) {
  plan::PlanHeader h;
  const int64_t batch = 2, heads = 4, queries = 6, keys = 10, d = 8, dv = 16;
  const int q = addTensor(h, {batch, heads, queries, d}, plan::BF16), k = addTensor(h, {batch, heads, keys, d});
  const int v = addTensor(h, {batch, heads, keys, dv}), mask = addTensor(h, {queries, keys});
  const int out = addTensor(h, {batch, heads, queries, dv}), lse = addTensor(h, {batch, heads, queries});
  // Q K^T: 2 d per pair; P V: 2 dv per pair.
  const double forward = static_cast<double>(batch * heads * queries * keys) * (2 * d + 2 * dv);
  EXPECT_EQ(instructionFlops(h, *addInstruction(h, "attention", {q, k, v, mask}, {out, lse})), forward);
  EXPECT_EQ(instructionFlops(h, *addInstruction(h, "attention_grad", {q, k, v, mask, out, lse, out}, {q, k, v})),
            2.5 * forward);

  const int64_t t = 6, packedD = 8;
  const int qkv = addTensor(h, {batch, t, 3 * heads * packedD}), packedOut = addTensor(h, {batch, t, heads * packedD});
  plan::Instruction *packed = addInstruction(h, "packed_attention", {qkv, mask}, {packedOut, lse});
  (*packed->mutable_int_attrs())["heads"] = heads;
  EXPECT_EQ(instructionFlops(h, *packed), static_cast<double>(batch * heads * t * t) * 4 * packedD);
}

TEST(Profile, SummaryAddsEachKernelsTimeCallsAndWorkOverTheSteps) {
  plan::PlanHeader h;
  const int a = addTensor(h, {4, 4}), b = addTensor(h, {4, 4});
  addInstruction(h, "matmul", {a, b}, {b});
  addInstruction(h, "add", {a, b}, {b});
  addInstruction(h, "record_event", {}, {});
  addInstruction(h, "matmul", {a, b}, {a});
  addInstruction(h, "all_gather", {a}, {b}, plan::COMMUNICATION);
  const std::vector<KernelProfile> rows = summarizeProfile(h, {1.0, 0.5, 0.0, 3.0, 2.0}, 2);
  ASSERT_EQ(rows.size(), 3u); // the event took no time
  EXPECT_EQ(rows[0].op, "matmul");
  EXPECT_EQ(rows[0].calls, 4);
  EXPECT_EQ(rows[0].seconds, 4.0);
  EXPECT_EQ(rows[0].flops, 2 * 2 * (2.0 * 4 * 4 * 4));
  EXPECT_EQ(rows[0].bytes, 2 * 2 * (3 * 64.0));
  EXPECT_EQ(rows[1].op, "all_gather (comm)");
  EXPECT_EQ(rows[2].op, "add");
  EXPECT_EQ(rows[2].calls, 2);
}

TEST(Profile, SlowestInstructionsArePerStepWithTheirShapesAndNode) {
  plan::PlanHeader h;
  const int a = addTensor(h, {4, 3}, plan::BF16), b = addTensor(h, {5, 3}, plan::BF16), c = addTensor(h, {4, 5});
  plan::Instruction *gemm = addInstruction(h, "matmul", {a, b}, {c});
  (*gemm->mutable_int_attrs())["transpose_b"] = 1;
  gemm->set_location("/lm_head/MatMul");
  addInstruction(h, "record_event", {}, {});
  addInstruction(h, "add", {c, c}, {c});
  addInstruction(h, "add", {c, c}, {c});
  const std::vector<InstructionProfile> rows = slowestInstructions(h, {6.0, 0.0, 1.0, 2.0}, 2, 2);
  ASSERT_EQ(rows.size(), 2u); // the two slowest of three timed
  EXPECT_EQ(rows[0].index, 0);
  EXPECT_EQ(rows[0].op, "matmul");
  EXPECT_EQ(rows[0].secondsPerCall, 3.0);
  EXPECT_EQ(rows[0].flopsPerCall, 2.0 * 4 * 5 * 3);
  EXPECT_EQ(rows[0].operands, "4x3 bf16, 5x3 bf16 -> 4x5 f32 (B transposed)");
  EXPECT_EQ(rows[0].location, "/lm_head/MatMul");
  EXPECT_EQ(rows[1].index, 3);
  EXPECT_EQ(rows[1].secondsPerCall, 1.0);
  EXPECT_EQ(rows[1].flopsPerCall, 0.0);
}

// The CPU device times each instruction where the plan has it: the
// instruction on the communication stream keeps its plan index, and the
// events take no time.
TEST(Profile, CpuDeviceTimesInstructionsInPlanOrder) {
  PlanFile plan;
  plan::PlanHeader &h = plan.header;
  h.set_world_size(1);
  h.set_transient_bytes(1 << 20);
  h.set_num_events(2);
  const int x = addTensor(h, {256, 256}), y = addTensor(h, {256, 256});
  h.mutable_tensors(y)->set_offset(256 * 256 * 4);
  (*addInstruction(h, "fill", {}, {x})->mutable_float_attrs())["value"] = 1.0;
  addInstruction(h, "record_event", {}, {})->set_event(0);
  addInstruction(h, "wait_event", {}, {}, plan::COMMUNICATION)->set_event(0);
  (*addInstruction(h, "scale", {x}, {y}, plan::COMMUNICATION)->mutable_float_attrs())["factor"] = 3.0;
  addInstruction(h, "record_event", {}, {}, plan::COMMUNICATION)->set_event(1);
  addInstruction(h, "wait_event", {}, {})->set_event(1);
  addInstruction(h, "matmul", {y, y}, {x});
  h.set_loss_tensor(x);
  StatusOr<std::unique_ptr<Executor>> executor = Executor::create(std::move(plan), createCpuDevice());
  ASSERT_TRUE(executor.isOk()) << executor.status().toString();
  EXPECT_TRUE((*executor)->device().instructionSeconds().empty());
  (*executor)->enableProfiling();
  ASSERT_TRUE((*executor)->runStep(1).isOk());
  const std::vector<double> seconds = (*executor)->device().instructionSeconds();
  ASSERT_EQ(seconds.size(), 7u);
  for (int event : {1, 2, 4, 5})
    EXPECT_EQ(seconds[event], 0.0) << event;
  EXPECT_GT(seconds[6], 0.0); // a 256 x 256 x 256 GEMM
  const std::vector<KernelProfile> rows = (*executor)->profile(1);
  auto matmul = std::find_if(rows.begin(), rows.end(), [](const KernelProfile &row) { return row.op == "matmul"; });
  ASSERT_NE(matmul, rows.end());
  EXPECT_EQ(matmul->calls, 1);
  EXPECT_EQ(matmul->flops, 2.0 * 256 * 256 * 256);
  EXPECT_EQ(matmul->seconds, seconds[6]);
}

} // namespace
