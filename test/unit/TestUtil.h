//===- TestUtil.h - Helpers for calling kernels in unit tests ---*- C++ -*-===//
#ifndef FSDPC_TEST_UNIT_TESTUTIL_H
#define FSDPC_TEST_UNIT_TESTUTIL_H

#include "fsdpc/runtime/Kernels.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace fsdpc::test {

/// Appends an instruction to a hand-built plan.
inline plan::Instruction *addPlanInstruction(plan::PlanHeader &h, const char *op, std::vector<int> inputs,
                                             std::vector<int> outputs, plan::Stream stream = plan::COMPUTE,
                                             int event = 0) {
  plan::Instruction *inst = h.add_instructions();
  inst->set_op(op);
  for (int i : inputs)
    inst->add_inputs(i);
  for (int o : outputs)
    inst->add_outputs(o);
  inst->set_stream(stream);
  inst->set_event(event);
  return inst;
}

struct Buffer {
  std::vector<float> f;
  std::vector<int64_t> i;
  std::vector<int64_t> shape;
  runtime::TensorView view() {
    runtime::TensorView v;
    v.shape = shape;
    if (!i.empty()) {
      v.dtype = plan::I64;
      v.data = i.data();
    } else {
      v.data = f.data();
    }
    return v;
  }
};

inline Buffer randomBuffer(std::vector<int64_t> shape, unsigned seed) {
  Buffer b;
  b.shape = shape;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  b.f.resize(n);
  for (float &x : b.f)
    x = normal(rng);
  return b;
}

inline Buffer zeros(std::vector<int64_t> shape) {
  Buffer b = randomBuffer(shape, 0);
  std::fill(b.f.begin(), b.f.end(), 0.0f);
  return b;
}

/// Runs the kernel `name` through the registry, as the executor would.
inline runtime::Status runKernel(const std::string &name, std::vector<Buffer *> inputs, std::vector<Buffer *> outputs,
                                 plan::Instruction inst = {}) {
  inst.set_op(name);
  runtime::DecodedParams params = runtime::decodeParams(inst);
  runtime::KernelCall call;
  call.instruction = &inst;
  call.params = &params;
  for (Buffer *b : inputs)
    call.inputs.push_back(b->view());
  for (Buffer *b : outputs)
    call.outputs.push_back(b->view());
  runtime::KernelFn fn = runtime::lookupKernel(name);
  EXPECT_NE(fn, nullptr) << name;
  return fn(call);
}

inline void expectNear(const std::vector<float> &got, const std::vector<double> &want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_NEAR(got[k], want[k], tolerance * (1 + std::abs(want[k]))) << "at element " << k;
}

} // namespace fsdpc::test

#endif // FSDPC_TEST_UNIT_TESTUTIL_H
