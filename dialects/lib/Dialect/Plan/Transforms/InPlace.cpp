//===- InPlace.cpp - plan-in-place ----------------------------------------===//
//
// Lets a kernel write an output over an input that dies with it, where the
// kernel contract says the kernel may (KernelSignature::inPlaceInput and
// inPlaceOutput): the output becomes a view of the input's bytes, so the
// arena holds one tensor where it held two. A language model's loss
// gradient is the case that matters: the [tokens, vocabulary] logits die as
// their gradient is born, and the two were the largest tensors at GPT-2's
// peak.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Plan/Transforms/Passes.h"

#include "fsdpc/Dialect/Plan/IR/Lifetimes.h"
#include "fsdpc/runtime/KernelContract.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace fsdpc::plan_ir {
#define GEN_PASS_DEF_PLANINPLACE
#include "fsdpc/Dialect/Plan/Transforms/Passes.h.inc"
} // namespace fsdpc::plan_ir

using namespace mlir;
using namespace fsdpc::plan_ir;

namespace {

struct PlanInPlacePass : public fsdpc::plan_ir::impl::PlanInPlaceBase<PlanInPlacePass> {
  void runOnOperation() override {
    ProgramOp program = getOperation();
    Block &block = program.getBlock();
    llvm::StringMap<TensorOp> tensors;
    for (TensorOp tensor : block.getOps<TensorOp>())
      tensors[tensor.getSymName()] = tensor;
    auto tensorOf = [&](Attribute ref) { return tensors.lookup(cast<FlatSymbolRefAttr>(ref).getValue()); };
    auto storageName = [&](Attribute ref) { return storageOf(tensorOf(ref), tensors).first.getSymName(); };

    ProgramLifetimes lifetimes = computeLifetimes(program);
    llvm::StringMap<TensorLifetime *> lifetimeOf;
    for (TensorLifetime &lifetime : lifetimes.transients)
      lifetimeOf[lifetime.tensor.getSymName()] = &lifetime;
    // Storage another stream or a copy touches: its lifetime reaches past
    // the instruction that last names it (Lifetimes.h), so it is left alone.
    llvm::StringSet<> elsewhere;
    for (Operation *op : lifetimes.instructions) {
      auto mark = [&](ArrayAttr refs) {
        for (Attribute ref : refs.getValue())
          elsewhere.insert(storageName(ref));
      };
      if (auto collective = dyn_cast<CollectiveOp>(op)) {
        mark(collective.getInputs());
        mark(collective.getOutputs());
      } else if (auto copy = dyn_cast<CopyOp>(op)) {
        elsewhere.insert(storageName(copy.getSourceAttr()));
        elsewhere.insert(storageName(copy.getTargetAttr()));
      } else if (auto kernel = dyn_cast<KernelOp>(op); kernel && kernel.getStream() != Stream::compute) {
        mark(kernel.getInputs());
        mark(kernel.getOutputs());
      }
    }

    OpBuilder builder(&getContext());
    for (auto [index, op] : llvm::enumerate(lifetimes.instructions)) {
      auto kernel = dyn_cast<KernelOp>(op);
      if (!kernel || kernel.getOnHost() || kernel.getOutputs().empty())
        continue;
      const fsdpc::contract::KernelSignature *signature = fsdpc::contract::findKernel(kernel.getKernel().str());
      if (!signature || signature->inPlaceInput < 0 ||
          signature->inPlaceInput >= static_cast<int>(kernel.getInputs().size()) ||
          signature->inPlaceOutput >= static_cast<int>(kernel.getOutputs().size()))
        continue;
      Attribute inputRef = kernel.getInputs()[signature->inPlaceInput];
      TensorOp input = tensorOf(inputRef), output = tensorOf(kernel.getOutputs()[signature->inPlaceOutput]);
      if (output.getKind() != TensorKind::transient || output.getHost() || input.getByteSize() != output.getByteSize())
        continue;
      TensorOp storageTensor = storageOf(input, tensors).first;
      StringRef storage = storageTensor.getSymName();
      if (storageTensor.getKind() != TensorKind::transient) // not an input the host fills
        continue;
      TensorLifetime *inputLife = lifetimeOf.lookup(storage);
      TensorLifetime *outputLife = lifetimeOf.lookup(output.getSymName());
      // The input's bytes die here and the output's are born here; nothing
      // else of this instruction names either.
      if (!inputLife || !outputLife || inputLife->last != static_cast<int64_t>(index) ||
          outputLife->first != static_cast<int64_t>(index) || elsewhere.contains(storage) ||
          elsewhere.contains(output.getSymName()))
        continue;
      int uses = 0;
      for (Attribute ref :
           llvm::concat<const Attribute>(kernel.getInputs().getValue(), kernel.getOutputs().getValue())) {
        StringRef name = storageName(ref);
        uses += name == storage || name == output.getSymName();
      }
      if (uses != 2)
        continue;
      output.setKind(TensorKind::view);
      output.setViewOfAttr(FlatSymbolRefAttr::get(&getContext(), input.getSymName()));
      output.setViewOffsetAttr(builder.getI64IntegerAttr(0));
      // The input's storage now lives on as the output: later candidates
      // see the merged lifetime.
      lifetimeOf.erase(output.getSymName());
      inputLife->last = outputLife->last;
    }
  }
};

} // namespace
