// The executor runs both streams and orders them with events.
#include "fsdpc/runtime/CpuDevice.h"
#include "fsdpc/runtime/Executor.h"
#include "fsdpc/runtime/Float16.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

using namespace fsdpc;
using namespace fsdpc::runtime;

namespace {

plan::Tensor *addTensor(plan::PlanHeader &h, const char *name, plan::Region region, uint64_t offset) {
  plan::Tensor *t = h.add_tensors();
  t->set_name(name);
  t->set_dtype(plan::F32);
  t->add_shape(4);
  t->set_kind(region == plan::PERSISTENT ? plan::CONSTANT : plan::TRANSIENT);
  t->set_region(region);
  t->set_offset(offset);
  t->set_bytes(16);
  t->set_init_section(-1);
  return t;
}

// compute: a = fill(2); record 0.   comm: wait 0; b = scale(a, 3); record 1.
// compute: wait 1; loss = b * b (first element 36).
TEST(Executor, EventsOrderTheTwoStreams) {
  PlanFile plan;
  plan::PlanHeader &h = plan.header;
  h.set_world_size(1);
  h.set_persistent_bytes(64);
  h.set_transient_bytes(256);
  h.set_num_events(2);
  addTensor(h, "a", plan::TRANSIENT_ARENA, 0);
  addTensor(h, "b", plan::TRANSIENT_ARENA, 64);
  addTensor(h, "c", plan::TRANSIENT_ARENA, 128);
  auto add = [&](const char *op, std::vector<int> in, std::vector<int> out, plan::Stream stream, int event = 0) {
    return test::addPlanInstruction(h, op, in, out, stream, event);
  };
  (*add("fill", {}, {0}, plan::COMPUTE)->mutable_float_attrs())["value"] = 2.0;
  add("record_event", {}, {}, plan::COMPUTE, 0);
  add("wait_event", {}, {}, plan::COMMUNICATION, 0);
  (*add("scale", {0}, {1}, plan::COMMUNICATION)->mutable_float_attrs())["factor"] = 3.0;
  add("record_event", {}, {}, plan::COMMUNICATION, 1);
  add("wait_event", {}, {}, plan::COMPUTE, 1);
  add("mul", {1, 1}, {2}, plan::COMPUTE);
  h.set_loss_tensor(2);

  StatusOr<std::unique_ptr<Executor>> executor = Executor::create(std::move(plan), createCpuDevice());
  ASSERT_TRUE(executor.isOk()) << executor.status().toString();
  for (int64_t step = 1; step <= 20; ++step) {
    StatusOr<float> loss = (*executor)->runStep(step);
    ASSERT_TRUE(loss.isOk());
    EXPECT_EQ(*loss, 36.0f);
  }
}

TEST(Executor, UnknownKernelIsRefusedAtLoad) {
  PlanFile plan;
  plan::PlanHeader &h = plan.header;
  h.set_world_size(1);
  h.set_transient_bytes(64);
  addTensor(h, "a", plan::TRANSIENT_ARENA, 0);
  h.add_instructions()->set_op("no_such_kernel");
  h.mutable_instructions(0)->add_outputs(0);
  h.set_loss_tensor(0);
  StatusOr<std::unique_ptr<Executor>> executor = Executor::create(std::move(plan), createCpuDevice());
  ASSERT_FALSE(executor.isOk());
  EXPECT_NE(executor.status().message().find("no_such_kernel"), std::string::npos);
}

} // namespace

namespace {

// A kernel on bf16 tensors computes in f32 and rounds its result to nearest
// even: y = x * x on bf16 storage equals bf16(f32(x) * f32(x)); a cast
// widens it back to f32 exactly.
TEST(Executor, Bf16StorageComputesInF32AndRoundsOnStore) {
  const int n = 37;
  std::vector<uint16_t> x(n);
  for (int i = 0; i < n; ++i)
    x[i] = floatToBf16(1.0f + 0.37f * i - 0.011f * i * i);
  PlanFile plan;
  plan::PlanHeader &h = plan.header;
  h.set_world_size(1);
  h.set_persistent_bytes(128);
  h.set_transient_bytes(512);
  auto tensor = [&](const char *name, plan::DType dtype, plan::Region region, uint64_t offset) {
    plan::Tensor *t = h.add_tensors();
    t->set_name(name);
    t->set_dtype(dtype);
    t->add_shape(n);
    t->set_kind(region == plan::PERSISTENT ? plan::CONSTANT : plan::TRANSIENT);
    t->set_region(region);
    t->set_offset(offset);
    t->set_bytes(n * dtypeSize(dtype));
    t->set_init_section(-1);
    return t;
  };
  tensor("x", plan::BF16, plan::PERSISTENT, 0)->set_init_section(plan.addSection(x.data(), n * 2));
  tensor("y", plan::BF16, plan::TRANSIENT_ARENA, 0);
  tensor("z", plan::F32, plan::TRANSIENT_ARENA, 128);
  plan::Instruction *mul = h.add_instructions();
  mul->set_op("mul");
  mul->add_inputs(0);
  mul->add_inputs(0);
  mul->add_outputs(1);
  plan::Instruction *cast = h.add_instructions();
  cast->set_op("cast");
  cast->add_inputs(1);
  cast->add_outputs(2);
  h.add_output_tensors(2);
  h.set_loss_tensor(-1);

  StatusOr<std::unique_ptr<Executor>> executor = Executor::create(std::move(plan), createCpuDevice());
  ASSERT_TRUE(executor.isOk()) << executor.status().toString();
  ASSERT_TRUE((*executor)->runStep(1).isOk());
  StatusOr<HostArray> y = (*executor)->downloadTensor(1), z = (*executor)->downloadTensor(2);
  ASSERT_TRUE(y.isOk() && z.isOk());
  for (int i = 0; i < n; ++i) {
    float exact = bf16ToFloat(x[i]) * bf16ToFloat(x[i]);
    EXPECT_EQ(y->data<uint16_t>()[i], floatToBf16(exact)) << i;
    EXPECT_EQ(z->data<float>()[i], bf16ToFloat(floatToBf16(exact))) << i;
  }
}

} // namespace
