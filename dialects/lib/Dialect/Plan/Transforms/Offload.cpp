//===- Offload.cpp - plan-offload -----------------------------------------===//
//
// Moves the sharded state --offload names to the host region and makes
// every instruction see its operands where it runs: kernels that write host
// state run on the host, everything else on the device, and each operand on
// the other side is staged through a plan.copy next to its instruction, on
// the instruction's stream (so the plan's events order the copy exactly as
// they ordered the instruction).
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Plan/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace fsdpc::plan_ir {
#define GEN_PASS_DEF_PLANOFFLOAD
#include "fsdpc/Dialect/Plan/Transforms/Passes.h.inc"
} // namespace fsdpc::plan_ir

using namespace mlir;
using namespace fsdpc::plan_ir;

namespace {

struct PlanOffloadPass : public fsdpc::plan_ir::impl::PlanOffloadBase<PlanOffloadPass> {
  using PlanOffloadBase::PlanOffloadBase;

  void runOnOperation() override {
    ProgramOp program = getOperation();
    if (what != "optimizer" && what != "params") {
      program.emitError("plan-offload: what must be optimizer or params, got '") << what << "'";
      return signalPassFailure();
    }
    Block &block = program.getBlock();
    // What moves: optimizer state, and with params every unit's parameter
    // and gradient shard (frozen parameters and buffers stay: torch's
    // CPUOffload moves the flat parameters).
    for (TensorOp tensor : block.getOps<TensorOp>()) {
      TensorKind kind = tensor.getKind();
      bool moves =
          kind == TensorKind::optimizer_state ||
          (what == "params" && tensor.getUnit() && (kind == TensorKind::parameter || kind == TensorKind::gradient));
      if (moves)
        tensor.setHost(true);
      tensors_[tensor.getSymName()] = tensor;
    }
    firstInstruction_ = nullptr;
    for (Operation &op : block)
      if (!isa<TensorOp, UnitOp>(op)) {
        firstInstruction_ = &op;
        break;
      }

    SmallVector<Operation *> instructions;
    for (Operation &op : block)
      if (isa<KernelOp, CollectiveOp>(op))
        instructions.push_back(&op);
    for (Operation *op : instructions) {
      if (auto kernel = dyn_cast<KernelOp>(op)) {
        bool writesHost = llvm::any_of(kernel.getOutputs(), [&](Attribute ref) { return onHost(ref); });
        if (writesHost)
          kernel.setOnHost(true);
        auto [inputs, outputs] =
            stage(op, kernel.getStream(), kernel.getInputs(), kernel.getOutputs(), /*runsOnHost=*/writesHost);
        kernel.setInputsAttr(inputs);
        kernel.setOutputsAttr(outputs);
      } else {
        auto collective = cast<CollectiveOp>(op);
        auto [inputs, outputs] = stage(op, collective.getStream(), collective.getInputs(), collective.getOutputs(),
                                       /*runsOnHost=*/false);
        collective.setInputsAttr(inputs);
        collective.setOutputsAttr(outputs);
      }
    }
  }

private:
  bool onHost(Attribute ref) { return tensors_.lookup(cast<FlatSymbolRefAttr>(ref).getValue()).isOnHost(); }

  /// `op`'s operand lists with every operand on the wrong side replaced by
  /// its staging tensor, the copies in and out placed around `op`.
  std::pair<ArrayAttr, ArrayAttr> stage(Operation *op, Stream stream, ArrayAttr inputs, ArrayAttr outputs,
                                        bool runsOnHost) {
    MLIRContext *context = op->getContext();
    // One staging tensor per tensor of this instruction (an in-place
    // operand is both an input and an output). Inputs are staged first, so
    // an in-place output finds its input's copy made and needs only the
    // copy back.
    llvm::StringMap<FlatSymbolRefAttr> staged;
    auto replace = [&](ArrayAttr refs, bool isInput) {
      SmallVector<Attribute> result;
      for (Attribute attr : refs) {
        auto ref = cast<FlatSymbolRefAttr>(attr);
        if (onHost(ref) == runsOnHost) {
          result.push_back(ref);
          continue;
        }
        auto [it, first] = staged.try_emplace(ref.getValue(), nullptr);
        if (first)
          it->second = FlatSymbolRefAttr::get(context, makeStaging(tensors_.lookup(ref.getValue()), runsOnHost));
        FlatSymbolRefAttr staging = it->second;
        if (isInput && first) {
          OpBuilder before(op);
          CopyOp::create(before, op->getLoc(), ref, staging, StreamAttr::get(context, stream));
        } else if (!isInput) {
          OpBuilder after(context);
          after.setInsertionPointAfter(op);
          CopyOp::create(after, op->getLoc(), staging, ref, StreamAttr::get(context, stream));
        }
        result.push_back(staging);
      }
      return ArrayAttr::get(context, result);
    };
    ArrayAttr newInputs = replace(inputs, /*isInput=*/true);
    ArrayAttr newOutputs = replace(outputs, /*isInput=*/false);
    return {newInputs, newOutputs};
  }

  /// A tensor holding `source`'s value on the other side: on the host (one
  /// per source, reused: host kernels all run on the compute stream, one at
  /// a time) or on the device (a new transient per use, so its lifetime
  /// ends with the instruction).
  StringAttr makeStaging(TensorOp source, bool onHost) {
    std::string base = source.getSymName().str() + (onHost ? ".host" : ".device");
    if (onHost)
      if (TensorOp existing = tensors_.lookup(base))
        return existing.getSymNameAttr();
    std::string name = base;
    for (int n = 1; tensors_.contains(name); ++n)
      name = base + "." + std::to_string(n);
    // Declared with the other tensors, before the first instruction.
    OpBuilder builder(firstInstruction_);
    auto staging = TensorOp::create(builder, source.getLoc(), builder.getStringAttr(name),
                                    TensorKindAttr::get(builder.getContext(), TensorKind::transient),
                                    TypeAttr::get(source.getTensorType()), StringAttr(), ElementsAttr(), StringAttr(),
                                    StringAttr(), IntegerAttr(), StringAttr(), FlatSymbolRefAttr(), IntegerAttr(),
                                    onHost ? builder.getUnitAttr() : UnitAttr());
    tensors_[name] = staging;
    return staging.getSymNameAttr();
  }

  llvm::StringMap<TensorOp> tensors_;
  Operation *firstInstruction_ = nullptr;
};

} // namespace
