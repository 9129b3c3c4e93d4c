// plan.bin write/read round trip, and refusal of corrupt files.
#include "fsdpc/runtime/AtomicFile.h"
#include "fsdpc/runtime/PlanFile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

using namespace fsdpc;
using namespace fsdpc::runtime;

namespace {

PlanFile samplePlan() {
  PlanFile plan;
  plan::PlanHeader &h = plan.header;
  h.set_world_size(1);
  h.set_persistent_bytes(64);
  h.set_transient_bytes(64);
  h.set_global_batch(2);
  float weights[3] = {1.5f, -2.0f, 3.25f};
  plan::Tensor *w = h.add_tensors();
  w->set_name("fc.weight");
  w->set_dtype(plan::F32);
  w->add_shape(3);
  w->set_kind(plan::PARAMETER);
  w->set_region(plan::PERSISTENT);
  w->set_bytes(12);
  w->set_init_section(plan.addSection(weights, sizeof(weights)));
  plan::Tensor *loss = h.add_tensors();
  loss->set_name("loss");
  loss->set_dtype(plan::F32);
  loss->set_kind(plan::TRANSIENT);
  loss->set_region(plan::TRANSIENT_ARENA);
  loss->set_bytes(4);
  loss->set_init_section(-1);
  plan::Instruction *fill = h.add_instructions();
  fill->set_op("fill");
  fill->add_outputs(1);
  (*fill->mutable_float_attrs())["value"] = 0.5;
  h.set_loss_tensor(1);
  return plan;
}

std::string tempPath(const char *name) { return ::testing::TempDir() + name; }

TEST(PlanFile, RoundTripKeepsHeaderDataAndHash) {
  PlanFile plan = samplePlan();
  std::string path = tempPath("roundtrip.plan");
  ASSERT_TRUE(writePlanFile(plan, path).isOk());
  StatusOr<PlanFile> read = readPlanFile(path);
  ASSERT_TRUE(read.isOk()) << read.status().toString();
  EXPECT_EQ(read->contentHash, plan.contentHash);
  EXPECT_EQ(read->header.SerializeAsString(), plan.header.SerializeAsString());
  const float *w = reinterpret_cast<const float *>(read->sectionData(0));
  EXPECT_EQ(w[0], 1.5f);
  EXPECT_EQ(w[2], 3.25f);
  // Sections start 64-byte aligned so they can be mapped and used in place.
  EXPECT_EQ(read->header.sections(0).offset() % kSectionAlignment, 0u);
}

TEST(PlanFile, CorruptionIsDetected) {
  PlanFile plan = samplePlan();
  std::string path = tempPath("corrupt.plan");
  ASSERT_TRUE(writePlanFile(plan, path).isOk());
  std::string bytes = *readWholeFile(path);
  bytes[bytes.size() - 3] ^= 0x40; // flip a bit in the weights
  std::ofstream(path, std::ios::binary) << bytes;
  StatusOr<PlanFile> read = readPlanFile(path);
  ASSERT_FALSE(read.isOk());
  EXPECT_NE(read.status().message().find("hash"), std::string::npos);
}

TEST(PlanFile, NotAPlanAndMissingFile) {
  std::string path = tempPath("not-a-plan");
  std::ofstream(path) << "hello";
  EXPECT_FALSE(readPlanFile(path).isOk());
  StatusOr<PlanFile> missing = readPlanFile(tempPath("does-not-exist"));
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);
}

TEST(PlanFile, ValidationRejectsOutOfRegionTensor) {
  PlanFile plan = samplePlan();
  plan.header.mutable_tensors(0)->set_offset(60);
  EXPECT_FALSE(validatePlan(plan).isOk());
}

// An offloaded plan (fsdpc --offload): host kernels touch the HOST region
// only, device kernels none of it, and copies go from one side to the
// other at the same size.
TEST(PlanFile, ValidationChecksWhereInstructionsRun) {
  auto offloaded = [] {
    PlanFile plan = samplePlan();
    plan::PlanHeader &h = plan.header;
    h.set_host_bytes(64);
    plan::Tensor *staged = h.add_tensors(); // tensor 2: the loss's host copy
    *staged = h.tensors(1);
    staged->set_name("loss.host");
    staged->set_region(plan::HOST);
    plan::Instruction *copy = h.add_instructions();
    copy->set_op("copy_to_host");
    copy->add_inputs(1);
    copy->add_outputs(2);
    plan::Instruction *hostFill = h.add_instructions();
    hostFill->set_op("fill");
    hostFill->set_on_host(true);
    hostFill->add_outputs(2);
    (*hostFill->mutable_float_attrs())["value"] = 1.0;
    return plan;
  };
  ASSERT_TRUE(validatePlan(offloaded()).isOk()) << validatePlan(offloaded()).toString();
  auto rejects = [&](const char *what, const char *expected, auto edit) {
    PlanFile plan = offloaded();
    edit(plan.header);
    Status status = validatePlan(plan);
    ASSERT_FALSE(status.isOk()) << what;
    EXPECT_NE(status.message().find(expected), std::string::npos) << what << ": " << status.toString();
  };
  rejects("a device kernel writing host memory", "runs on the device but touches 'loss.host' in host memory",
          [](plan::PlanHeader &h) { h.mutable_instructions(2)->set_on_host(false); });
  rejects("a host kernel writing device memory", "runs on the host but touches 'loss' in device memory",
          [](plan::PlanHeader &h) { h.mutable_instructions(0)->set_on_host(true); });
  rejects("a copy naming the wrong direction", "which are not the same size on the sides it names",
          [](plan::PlanHeader &h) { h.mutable_instructions(1)->set_op("copy_to_device"); });
  rejects("a host tensor outside the host region", "lies outside its region",
          [](plan::PlanHeader &h) { h.set_host_bytes(2); });
}

// A plan rewritten with a matching hash is only as safe as the validator
// (issue 15, finding 6): offsets and sizes whose sums or products wrap
// around once passed it and sent kernels out of their buffers.
TEST(PlanFile, ValidationRejectsWrappedAndHugeSizes) {
  auto rejects = [](const char *what, auto edit) {
    PlanFile plan = samplePlan();
    ASSERT_TRUE(validatePlan(plan).isOk());
    edit(plan);
    EXPECT_FALSE(validatePlan(plan).isOk()) << what;
  };
  rejects("tensor offset wrapping past the region", [](PlanFile &p) {
    p.header.mutable_tensors(0)->set_offset(~uint64_t(0) - 7);
  });
  rejects("section offset wrapping past the data", [](PlanFile &p) {
    p.header.mutable_sections(0)->set_offset(~uint64_t(0) - 3);
  });
  rejects("shape whose byte size wraps to the stored one", [](PlanFile &p) {
    plan::Tensor *w = p.header.mutable_tensors(0);
    w->clear_shape();
    w->add_shape(int64_t(1) << 62);
    w->add_shape(4); // 2^64 elements x 4 bytes wraps to 0...
    w->set_bytes(0);
  });
  rejects("region past 2^50 bytes", [](PlanFile &p) { p.header.set_persistent_bytes(uint64_t(1) << 60); });
  rejects("negative event count", [](PlanFile &p) { p.header.set_num_events(-1); });
  rejects("huge event count", [](PlanFile &p) { p.header.set_num_events(1 << 30); });
  rejects("huge class count", [](PlanFile &p) { p.header.set_num_classes(int64_t(1) << 40); });
  // Found by fuzz-plan: a float tensor at an odd offset made kernels store
  // through a misaligned float pointer (undefined behaviour).
  rejects("float tensor at an offset that is not a multiple of 4", [](PlanFile &p) {
    p.header.mutable_tensors(1)->set_offset(13);
  });
}

TEST(AtomicFile, FailedWriteKeepsPreviousFile) {
  std::string path = tempPath("atomic.txt");
  ASSERT_TRUE(writeFileAtomically(path, [&](FILE *f) { return writeBytes(f, "old", 3, path); }).isOk());
  Status failed = writeFileAtomically(path, [&](FILE *f) -> Status {
    (void)writeBytes(f, "partial", 7, path);
    return FSDPC_ERROR(kInternal, "simulated crash");
  });
  EXPECT_FALSE(failed.isOk());
  EXPECT_EQ(*readWholeFile(path), "old");
}

} // namespace
