// The operand rules of the kernel contract (KernelOperands.h): validatePlan
// refuses an instruction whose operand dtypes or shapes its kernel cannot
// take, before anything runs (issue 15, finding 6: rewritten plans with the
// wrong shapes sent kernels out of their buffers).
#include "fsdpc/runtime/KernelContract.h"
#include "fsdpc/runtime/KernelOperands.h"
#include "fsdpc/runtime/PlanFile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

using namespace fsdpc;
using namespace fsdpc::runtime;

namespace {

struct TensorSpec {
  plan::DType dtype;
  std::vector<int64_t> shape;
};

/// A plan of one instruction `op` over fresh transient tensors, `inputs`
/// then `outputs`, with `edit` setting its parameters.
template <typename Edit>
PlanFile onePlan(const std::string &op, std::vector<TensorSpec> inputs, std::vector<TensorSpec> outputs, Edit edit) {
  PlanFile plan;
  plan::PlanHeader &h = plan.header;
  h.set_world_size(1);
  uint64_t offset = 0;
  plan::Instruction *inst = h.add_instructions();
  inst->set_op(op);
  inst->set_location("test.onnx:node");
  auto add = [&](const TensorSpec &spec) {
    plan::Tensor *t = h.add_tensors();
    t->set_name("t" + std::to_string(h.tensors_size()));
    t->set_dtype(spec.dtype);
    int64_t count = 1;
    for (int64_t d : spec.shape)
      t->add_shape(d), count *= d;
    t->set_kind(plan::TRANSIENT);
    t->set_region(plan::TRANSIENT_ARENA);
    t->set_bytes(count * dtypeSize(spec.dtype));
    t->set_offset(offset);
    t->set_init_section(-1);
    offset += (t->bytes() + 63) / 64 * 64;
    return h.tensors_size() - 1;
  };
  for (const TensorSpec &spec : inputs)
    inst->add_inputs(add(spec));
  for (const TensorSpec &spec : outputs)
    inst->add_outputs(add(spec));
  h.set_transient_bytes(offset);
  h.set_loss_tensor(inst->outputs(0));
  edit(*inst);
  return plan;
}

PlanFile onePlan(const std::string &op, std::vector<TensorSpec> inputs, std::vector<TensorSpec> outputs) {
  return onePlan(op, std::move(inputs), std::move(outputs), [](plan::Instruction &) {});
}

const TensorSpec f32(std::vector<int64_t> shape) { return {plan::F32, std::move(shape)}; }
const TensorSpec i64(std::vector<int64_t> shape) { return {plan::I64, std::move(shape)}; }
const TensorSpec bf16(std::vector<int64_t> shape) { return {plan::BF16, std::move(shape)}; }

void expectAccepted(const PlanFile &plan) {
  Status status = validatePlan(plan);
  EXPECT_TRUE(status.isOk()) << plan.header.instructions(0).op() << ": " << status.toString();
}

void expectRefused(const PlanFile &plan, const std::string &words) {
  Status status = validatePlan(plan);
  ASSERT_FALSE(status.isOk()) << plan.header.instructions(0).op() << " was accepted";
  EXPECT_NE(status.message().find(words), std::string::npos) << status.toString();
  // Every refusal names the kernel and the instruction's location.
  EXPECT_NE(status.message().find(plan.header.instructions(0).op()), std::string::npos) << status.toString();
  EXPECT_NE(status.message().find("test.onnx:node"), std::string::npos) << status.toString();
}

} // namespace

TEST(KernelOperands, EveryContractKernelNamesItsRule) {
  for (const contract::KernelSignature &signature : contract::kernelSignatures())
    EXPECT_NE(signature.operands, contract::OperandRule::kUnspecified) << signature.name;
}

TEST(KernelOperands, Gemm) {
  expectAccepted(onePlan("matmul", {f32({2, 3}), f32({3, 4})}, {f32({2, 4})}));
  expectAccepted(onePlan("matmul", {bf16({5, 2, 3}), bf16({3, 4})}, {f32({5, 2, 4})}));
  expectRefused(onePlan("matmul", {f32({2, 3}), f32({3, 4})}, {f32({2, 5})}), "do not match");
  expectRefused(onePlan("matmul", {f32({2, 3}), f32({4, 4})}, {f32({2, 4})}), "do not match");
  // An index tensor read as floats: half its bytes, the other half beyond.
  expectRefused(onePlan("matmul", {f32({2, 3}), i64({3, 4})}, {f32({2, 4})}), "dtype I64");
  expectRefused(onePlan("matmul_bias", {f32({2, 3}), f32({3, 4}), f32({5})}, {f32({2, 4})}), "bias");
  auto transposeA = [](plan::Instruction &i) { (*i.mutable_int_attrs())["transpose_a"] = 1; };
  expectAccepted(onePlan("matmul_bias_grad", {bf16({6, 3}), bf16({6, 4})}, {bf16({3, 4}), bf16({4})}, transposeA));
  expectRefused(onePlan("matmul_bias_grad", {f32({6, 3}), f32({6, 4})}, {f32({3, 4}), f32({6})}, transposeA),
                "bias gradient");
  expectRefused(onePlan("matmul_bias_grad", {f32({6, 3}), f32({4, 6})}, {f32({3, 4}), f32({4})},
                        [](plan::Instruction &i) {
                          (*i.mutable_int_attrs())["transpose_a"] = 1;
                          (*i.mutable_int_attrs())["transpose_b"] = 1;
                        }),
                "must not be transposed");
  // bias_grad_of_a: dY is A ([rows, M], transposed), the bias gradient [M].
  auto ofA = [](plan::Instruction &i) {
    (*i.mutable_int_attrs())["transpose_a"] = 1;
    (*i.mutable_int_attrs())["bias_grad_of_a"] = 1;
  };
  expectAccepted(onePlan("matmul_bias_grad", {f32({6, 3}), f32({6, 4})}, {f32({3, 4}), f32({3})}, ofA));
  expectRefused(onePlan("matmul_bias_grad", {f32({6, 3}), f32({6, 4})}, {f32({3, 4}), f32({4})}, ofA), "bias gradient");
  expectRefused(onePlan("matmul_bias_grad", {f32({3, 6}), f32({6, 4})}, {f32({3, 4}), f32({3})},
                        [](plan::Instruction &i) { (*i.mutable_int_attrs())["bias_grad_of_a"] = 1; }),
                "must be transposed");
  // k = 0 once divided by zero in the CPU kernel's row count.
  expectAccepted(onePlan("matmul", {f32({2, 0}), f32({0, 4})}, {f32({2, 4})}));
  expectAccepted(onePlan("batch_matmul", {f32({3, 2, 5}), f32({1, 5, 4})}, {f32({3, 2, 4})}));
  expectRefused(onePlan("batch_matmul", {f32({3, 2, 5}), f32({2, 5, 4})}, {f32({3, 2, 4})}), "do not match");
}

// accumulate (a residual add folded into the kernel) means exactly one
// more input, the output's shape: a third matmul input is never taken for a
// bias, nor a bias for an addend.
TEST(KernelOperands, Accumulate) {
  auto accumulate = [](plan::Instruction &i) { (*i.mutable_int_attrs())["accumulate"] = 1; };
  expectAccepted(onePlan("matmul", {f32({2, 3}), f32({3, 4}), f32({2, 4})}, {f32({2, 4})}, accumulate));
  expectAccepted(onePlan("matmul_bias", {bf16({2, 3}), bf16({3, 4}), bf16({4}), bf16({2, 4})}, {bf16({2, 4})},
                         accumulate));
  expectRefused(onePlan("matmul", {f32({2, 3}), f32({3, 4}), f32({2, 4})}, {f32({2, 4})}), "needs accumulate");
  expectRefused(onePlan("matmul_bias", {f32({2, 3}), f32({3, 4}), f32({4})}, {f32({2, 4})}, accumulate),
                "takes 3 inputs and the addend");
  expectRefused(onePlan("matmul", {f32({2, 3}), f32({3, 4}), f32({4, 2})}, {f32({2, 4})}, accumulate),
                "accumulate needs the output's shape and dtype");
  expectRefused(onePlan("matmul", {bf16({2, 3}), bf16({3, 4}), f32({2, 4})}, {bf16({2, 4})}, accumulate),
                "accumulate needs the output's shape and dtype");
  expectAccepted(onePlan("layer_norm_grad", {f32({3, 4}), f32({4}), f32({3}), f32({3}), f32({3, 4}), f32({3, 4})},
                         {f32({3, 4}), f32({4}), f32({4})},
                         [](plan::Instruction &i) {
                           (*i.mutable_int_attrs())["axis"] = 1;
                           (*i.mutable_int_attrs())["accumulate"] = 1;
                         }));
  expectAccepted(onePlan("rms_norm_grad", {bf16({3, 4}), bf16({4}), f32({3}), bf16({3, 4}), bf16({3, 4})},
                         {bf16({3, 4}), bf16({4})},
                         [](plan::Instruction &i) {
                           (*i.mutable_int_attrs())["axis"] = 1;
                           (*i.mutable_int_attrs())["accumulate"] = 1;
                         }));
  // Five inputs of rms_norm_grad without accumulate are not layer_norm_grad's.
  expectRefused(onePlan("rms_norm_grad", {f32({3, 4}), f32({4}), f32({3}), f32({3, 4}), f32({3, 4})},
                        {f32({3, 4}), f32({4})}, [](plan::Instruction &i) { (*i.mutable_int_attrs())["axis"] = 1; }),
                "needs accumulate");
}

TEST(KernelOperands, Elementwise) {
  expectAccepted(onePlan("add", {f32({4, 3}), f32({3})}, {f32({4, 3})}));
  expectRefused(onePlan("add", {f32({4, 3}), f32({4})}, {f32({4, 3})}), "does not broadcast");
  expectRefused(onePlan("relu", {f32({7})}, {f32({8})}), "elements");
  expectRefused(onePlan("relu_grad", {f32({8}), f32({7})}, {f32({8})}), "elements");
  expectRefused(onePlan("dropout", {f32({3})}, {f32({30})}, [](plan::Instruction &i) {
                  (*i.mutable_float_attrs())["ratio"] = 0.5;
                  (*i.mutable_int_attrs())["seed"] = 1;
                }),
                "elements");
  expectRefused(onePlan("dropout", {f32({3})}, {f32({3})}, [](plan::Instruction &i) {
                  (*i.mutable_float_attrs())["ratio"] = 1.0;
                  (*i.mutable_int_attrs())["seed"] = 1;
                }),
                "ratio");
  expectRefused(onePlan("select", {f32({3}), f32({3}), f32({3})}, {f32({3})}), "dtype F32");
  expectRefused(onePlan("is_nan", {f32({3})}, {f32({3})}), "integer");
  auto predicate = [](const char *p) {
    return [p](plan::Instruction &i) { (*i.mutable_string_attrs())["predicate"] = p; };
  };
  expectAccepted(onePlan("compare", {f32({4, 3}), f32({3})}, {i64({4, 3})}, predicate("lt")));
  expectAccepted(onePlan("compare", {i64({4, 3}), i64({})}, {i64({4, 3})}, predicate("ne")));
  expectRefused(onePlan("compare", {f32({3}), i64({3})}, {i64({3})}, predicate("eq")), "dtype");
  expectRefused(onePlan("compare", {f32({3}), f32({3})}, {f32({3})}, predicate("eq")), "integer");
  expectRefused(onePlan("compare", {f32({4, 3}), f32({4})}, {i64({4, 3})}, predicate("eq")), "does not broadcast");
  expectRefused(onePlan("compare", {f32({3}), f32({3})}, {i64({3})}, predicate("below")), "predicate");
  expectRefused(onePlan("compare", {f32({3}), f32({3})}, {i64({3})}), "predicate");
  // Rotary: cos and sin of x's rank and last dimension, broadcast along the
  // others; an even last dimension; the output x's shape.
  expectAccepted(onePlan("rotary", {bf16({2, 5, 3, 8}), bf16({2, 5, 1, 8}), f32({1, 5, 1, 8})}, {bf16({2, 5, 3, 8})}));
  expectRefused(onePlan("rotary", {f32({2, 7}), f32({1, 7}), f32({1, 7})}, {f32({2, 7})}), "even");
  expectRefused(onePlan("rotary", {f32({2, 8}), f32({1, 8}), f32({1, 8})}, {f32({16})}), "output of its shape");
  expectRefused(onePlan("rotary_grad", {f32({2, 8}), f32({8}), f32({1, 8})}, {f32({2, 8})}), "input 1 [8]");
  expectRefused(onePlan("rotary_grad", {f32({2, 8}), f32({1, 8}), f32({2, 1})}, {f32({2, 8})}), "input 2 [2,1]");
  expectRefused(onePlan("rotary", {f32({2, 8}), f32({3, 8}), f32({1, 8})}, {f32({2, 8})}), "broadcast to it");
  expectRefused(onePlan("rotary", {f32({2, 8}), i64({1, 8}), f32({1, 8})}, {f32({2, 8})}), "float");
}

TEST(KernelOperands, ShapeAndIndexing) {
  auto axis = [](int64_t a) { return [a](plan::Instruction &i) { (*i.mutable_int_attrs())["axis"] = a; }; };
  expectAccepted(onePlan("concat", {f32({2, 3}), f32({2, 1})}, {f32({2, 4})}, axis(1)));
  expectRefused(onePlan("concat", {f32({2, 3}), f32({2, 1})}, {f32({2, 5})}, axis(1)), "add up");
  expectRefused(onePlan("concat", {f32({2, 3}), f32({3, 1})}, {f32({2, 4})}, axis(1)), "does not fit");
  expectRefused(onePlan("concat", {f32({2, 3}), i64({2, 1})}, {f32({2, 4})}, axis(1)), "other data operands");
  expectAccepted(onePlan("gather", {f32({10, 4}), i64({6})}, {f32({6, 4})}, axis(0)));
  expectRefused(onePlan("gather", {f32({10, 4}), i64({6})}, {f32({7, 4})}, axis(0)), "elements");
  expectRefused(onePlan("gather", {f32({10, 4}), f32({6})}, {f32({6, 4})}, axis(0)), "integer");
  expectRefused(onePlan("gather_grad", {f32({5, 4}), i64({6})}, {f32({10, 4})}, axis(0)), "elements");
  auto perm = [](std::vector<int64_t> p) {
    return [p](plan::Instruction &i) {
      for (int64_t d : p)
        (*i.mutable_int_list_attrs())["perm"].add_values(d);
    };
  };
  expectAccepted(onePlan("transpose", {i64({2, 3, 4})}, {i64({4, 2, 3})}, perm({2, 0, 1})));
  expectRefused(onePlan("transpose", {f32({2, 3, 4})}, {f32({4, 2, 3})}, perm({2, 0, 0})), "permute");
  expectRefused(onePlan("transpose", {f32({2, 3, 4})}, {f32({4, 2, 3})}, perm({7, 0, 1})), "permute");
  expectRefused(onePlan("copy", {f32({4})}, {i64({4})}), "other data operands");
  expectRefused(onePlan("one_hot", {i64({4})}, {f32({5, 3})}), "class axis");
  expectRefused(onePlan("arg_max", {f32({4, 3})}, {f32({4, 1})}, axis(1)), "integer");
}

TEST(KernelOperands, NormsAttentionLossesOptimizers) {
  auto norm = [](plan::Instruction &i) {
    (*i.mutable_int_attrs())["axis"] = 1;
    (*i.mutable_float_attrs())["epsilon"] = 1e-5;
  };
  expectAccepted(onePlan("layer_norm", {f32({4, 8}), f32({8}), f32({8})}, {f32({4, 8}), f32({4}), f32({4})}, norm));
  expectRefused(onePlan("layer_norm", {f32({4, 8}), f32({8}), f32({8})}, {f32({4, 8}), f32({4}), f32({3})}, norm),
                "statistic");
  expectRefused(onePlan("rms_norm", {f32({4, 8}), f32({8})}, {f32({4, 9}), f32({4})}, norm), "output");
  auto scale = [](plan::Instruction &i) { (*i.mutable_float_attrs())["scale"] = 0.5; };
  expectAccepted(onePlan("attention", {f32({2, 3, 5, 4}), f32({2, 3, 6, 4}), f32({2, 3, 6, 7}), i64({5, 6})},
                         {f32({2, 3, 5, 7}), f32({2, 3, 5})}, scale));
  expectRefused(onePlan("attention", {f32({2, 3, 5, 4}), f32({1, 3, 6, 4}), f32({2, 3, 6, 7}), i64({5, 6})},
                        {f32({2, 3, 5, 7}), f32({2, 3, 5})}, scale),
                "do not fit together");
  expectRefused(onePlan("attention", {f32({2, 3, 5, 4}), f32({2, 3, 6, 4}), f32({2, 3, 6, 7}), f32({5, 6})},
                        {f32({2, 3, 5, 7}), f32({2, 3, 5})}, scale),
                "integer");
  auto packed = [](plan::Instruction &i) {
    (*i.mutable_float_attrs())["scale"] = 0.5;
    (*i.mutable_int_attrs())["heads"] = 3;
  };
  expectAccepted(
      onePlan("packed_attention", {f32({2, 5, 36}), i64({5, 5})}, {f32({2, 5, 12}), f32({2, 3, 5})}, packed));
  expectRefused(onePlan("packed_attention", {f32({2, 5, 35}), i64({5, 5})}, {f32({2, 5, 12}), f32({2, 3, 5})}, packed),
                "heads of one size");
  expectRefused(onePlan("packed_attention", {f32({2, 5, 36}), i64({4, 5})}, {f32({2, 5, 12}), f32({2, 3, 5})}, packed),
                "does not broadcast");
  expectRefused(onePlan("packed_attention_grad",
                        {f32({2, 5, 36}), i64({5, 5}), f32({2, 5, 12}), f32({2, 3, 5}), f32({2, 5, 12})},
                        {f32({2, 5, 12})}, packed),
                "gradient");
  expectRefused(onePlan("softmax_cross_entropy", {f32({4, 10}), i64({5})}, {f32({})}), "do not match");
  expectRefused(onePlan("softmax_cross_entropy", {f32({4, 10}), i64({4})}, {f32({2})}), "one element");
  expectAccepted(
      onePlan("softmax_cross_entropy_with_grad", {bf16({4, 10}), i64({4}), f32({})}, {f32({}), bf16({4, 10})}));
  expectRefused(onePlan("softmax_cross_entropy_with_grad", {bf16({4, 10}), i64({4}), f32({})}, {f32({}), f32({4, 10})}),
                "the dtype of its other data operands");
  expectRefused(onePlan("softmax_cross_entropy_with_grad", {f32({4, 10}), i64({4}), f32({})}, {f32({}), f32({4, 9})}),
                "logits gradient");
  auto sgd = [](double momentum) {
    return [momentum](plan::Instruction &i) {
      for (const char *name : {"lr", "dampening", "weight_decay"})
        (*i.mutable_float_attrs())[name] = 0.1;
      (*i.mutable_float_attrs())["momentum"] = momentum;
      (*i.mutable_int_attrs())["nesterov"] = 0;
    };
  };
  expectAccepted(onePlan("sgd_update", {f32({6}), f32({6}), i64({1})}, {f32({6})}, sgd(0)));
  // With momentum the kernel reads a momentum buffer the plan must hold.
  expectRefused(onePlan("sgd_update", {f32({6}), f32({6}), i64({1})}, {f32({6})}, sgd(0.9)), "momentum");
  expectRefused(onePlan("sgd_update", {f32({6}), f32({5}), i64({1})}, {f32({6})}, sgd(0)), "shard operand");
  expectRefused(onePlan("sgd_update", {f32({6}), f32({6}), f32({1})}, {f32({6})}, sgd(0)), "integer");
}

// Hyperparameters as the graph verifiers hold them, for plans written or
// edited by hand: a NaN learning rate or a beta of 1 is refused at load.
TEST(KernelOperands, OptimizerHyperparameters) {
  auto adamw = [](const char *name, double value) {
    return [name, value](plan::Instruction &i) {
      auto &f = *i.mutable_float_attrs();
      f["lr"] = 1e-3, f["beta1"] = 0.9, f["beta2"] = 0.999, f["eps"] = 1e-8, f["weight_decay"] = 0.01;
      f[name] = value;
    };
  };
  auto adamwPlan = [](auto edit) {
    return onePlan("adamw_update", {f32({6}), f32({6}), f32({6}), f32({6}), i64({1})}, {f32({6}), f32({6}), f32({6})},
                   edit);
  };
  const double nan = std::nan(""), inf = HUGE_VAL;
  expectAccepted(adamwPlan(adamw("lr", 1e-3)));
  expectRefused(adamwPlan(adamw("lr", nan)), "lr nan, not a finite number >= 0");
  expectRefused(adamwPlan(adamw("eps", -1e-8)), "eps");
  expectRefused(adamwPlan(adamw("weight_decay", inf)), "weight_decay inf");
  expectRefused(adamwPlan(adamw("min_lr", nan)), "min_lr");
  expectRefused(adamwPlan(adamw("beta1", 1.0)), "beta1 1.000000 outside [0, 1)");
  expectRefused(adamwPlan(adamw("beta2", nan)), "beta2 nan outside [0, 1)");
  auto sgd = [](const char *name, double value) {
    return [name, value](plan::Instruction &i) {
      auto &f = *i.mutable_float_attrs();
      f["lr"] = 0.1, f["momentum"] = 0, f["dampening"] = 0, f["weight_decay"] = 0;
      f[name] = value;
      (*i.mutable_int_attrs())["nesterov"] = 0;
    };
  };
  auto sgdPlan = [](auto edit) { return onePlan("sgd_update", {f32({6}), f32({6}), i64({1})}, {f32({6})}, edit); };
  expectAccepted(sgdPlan(sgd("lr", 0.5)));
  expectRefused(sgdPlan(sgd("lr", -0.1)), "lr -0.100000");
  expectRefused(sgdPlan(sgd("momentum", nan)), "momentum nan");
}
