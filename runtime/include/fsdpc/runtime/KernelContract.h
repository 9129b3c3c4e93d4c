//===- KernelContract.h - the kernels a plan may call ----------*- C++ -*-===//
//
// One table of every kernel a plan instruction may name: its operand and
// result counts, its parameters with their types, and the rule its
// operands' dtypes and shapes follow. The compiler's
// verifier of `plan.kernel` checks each instruction against it (so a wrong
// name, arity or parameter is a compile-time error), the plan loader checks
// each plan against it, and every backend's kernel table must implement
// exactly these names (a unit test checks the CPU backend's).
//
// Plain C++ with no dependency at all: the MLIR dialects and the runtime
// both link it, and the runtime never depends on MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_KERNELCONTRACT_H
#define FSDPC_RUNTIME_KERNELCONTRACT_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fsdpc::contract {

/// Every kernel parameter name as one id. Kernels read their parameters,
/// decoded once when the plan loads, by id (KernelCall::floatParam, ...).
enum class Param : uint8_t {
  kTransposeA,
  kTransposeB,
  kAxis,
  kEpsilon,
  kStarts,
  kSteps,
  kRatio,
  kSeed,
  kApproximate,
  kReduction,
  kIgnoreIndex,
  kFactor,
  kAxes,
  kKeepdims,
  kToBool,
  kK,
  kUpper,
  kPerm,
  kValue,
  kLr,
  kMomentum,
  kDampening,
  kWeightDecay,
  kNesterov,
  kBeta1,
  kBeta2,
  kEps,
  kScale,
  kKeyTransposed,
  kLrSchedule,
  kWarmupSteps,
  kTotalSteps,
  kMinLr,
  kMaxNorm,
  kSelectLastIndex,
  kComputeDtype,
  kHeads,
  kCausal,
  kClasses,
  kAccumulate,
  kPredicate,
  kMaskCoversCausal,
  kTokenMajor,
  kSoftcap,
  kInterleaved,
  kTransposeWeights,
  kBiasGradOfA,
  kActivation,
  kCount
};

/// The name of a parameter id, as plans and the plan dialect write it.
std::string_view paramName(Param param);
/// The id of a parameter name, or Param::kCount for none.
Param findParam(std::string_view name);

/// How a kernel parameter is written: in the plan dialect as a BoolAttr,
/// IntegerAttr, FloatAttr, DenseI64ArrayAttr or StringAttr; in a plan file
/// in int_attrs (bool and int), float_attrs, int_list_attrs or string_attrs.
enum class AttrType { kBool, kInt, kFloat, kIntList, kString };

struct AttrSpec {
  std::string_view name;
  AttrType type;
  bool required;

  Param id() const { return findParam(name); }
};

/// What a kernel needs of its operands' dtypes and shapes, by family: the
/// runtime's rule for each (KernelOperands.cpp) is checked when a plan
/// loads, before any backend runs it.
enum class OperandRule : uint8_t {
  kUnspecified, // an entry that forgot its rule: its kernel is refused at load
  kGemm,
  kGemmBiasGrad,
  kBatchGemm,
  kExpertGemm,
  kBinaryBroadcast,
  kElementwise,
  kGelu,
  kGatedActivation,
  kRotary,
  kReduceSum,
  kBroadcastTo,
  kSumTo,
  kConcat,
  kSlice,
  kSliceGrad,
  kGather,
  kGatherGrad,
  kSelect,
  kIsNan,
  kCompare,
  kOneHot,
  kArgReduce,
  kCast,
  kTrilu,
  kTranspose,
  kCopy,
  kFill,
  kDropout,
  kSoftmax,
  kMaskedSoftmax,
  kAttention,
  kAttentionGrad,
  kPackedAttention,
  kPackedAttentionGrad,
  kNorm,
  kNormGrad,
  kCrossEntropy,
  kCrossEntropyGrad,
  kCrossEntropyWithGrad,
  kMse,
  kOptimizer,
  kSumSquares,
  kClipCoefficient,
};

struct KernelSignature {
  std::string_view name;
  int minInputs, maxInputs; // maxInputs -1: any number from minInputs
  int minOutputs, maxOutputs;
  std::vector<AttrSpec> attrs;
  OperandRule operands;
  // The input whose bytes output `inPlaceOutput` may take (plan-in-place),
  // or -1: the kernel reads each element of it before writing the same
  // element of the output, and reads the rest of what it needs beforehand,
  // on every backend.
  int inPlaceInput = -1;
  int inPlaceOutput = 0;

  const AttrSpec *findAttr(std::string_view attr) const;
};

/// Every kernel, in a fixed order.
const std::vector<KernelSignature> &kernelSignatures();

/// The signature of the kernel called `name`, or nullptr.
const KernelSignature *findKernel(std::string_view name);

/// "bool", "int", "float", "int list", "string".
std::string_view attrTypeName(AttrType type);

/// Empty if `numInputs` operands and `numOutputs` results fit the
/// signature; otherwise why not, e.g. "takes 2 inputs, got 3".
std::string checkArity(const KernelSignature &signature, int numInputs, int numOutputs);

} // namespace fsdpc::contract

#endif // FSDPC_RUNTIME_KERNELCONTRACT_H
