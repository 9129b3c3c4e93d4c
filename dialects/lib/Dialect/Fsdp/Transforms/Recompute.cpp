//===- Recompute.cpp - fsdp-recompute -------------------------------------===//
//
// Replays the forward segment of chosen units just before their backward,
// so the segment's activations need not stay live from forward to backward.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"

#include "fsdpc/Dialect/Fsdp/IR/FsdpDialect.h"
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h"
#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "fsdpc/Dialect/Graph/IR/GraphOps.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Regex.h"

namespace fsdpc::fsdp {
#define GEN_PASS_DEF_FSDPRECOMPUTE
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h.inc"
} // namespace fsdpc::fsdp

using namespace mlir;
using namespace fsdpc;

namespace {

enum class Mode { kKeep, kFull, kCheap };

struct Clause {
  Mode mode;
  llvm::Regex regex;
};

/// GEMMs and attention: what selective checkpointing keeps.
bool isExpensive(Operation *op) {
  return isa<graph::MatmulOp, graph::BatchMatmulOp, graph::ExpertMatmulOp, graph::AttentionOp,
             graph::PackedAttentionOp>(op);
}

bool isFoldedIntoGemm(Operation *op);

/// Whether `value` is a GEMM's result that the lowering may fold its one
/// reader into: a matmul's, or a bias add's that is folded into one.
bool isFoldableGemmResult(Value value) {
  if (!value.hasOneUse())
    return false;
  if (value.getDefiningOp<graph::MatmulOp>())
    return true;
  auto bias = value.getDefiningOp<graph::AddOp>();
  return bias && isFoldedIntoGemm(bias);
}

/// An op that the lowering folds into the GEMM computing one of its
/// operands, kept with that GEMM: the add of a bias to a matmul's result (a
/// Linear layer, matmul_bias), then an add of a tensor of the same type to
/// that (a residual add, matmul_bias or matmul with accumulate), and a
/// reshape between the two that only the residual add reads (transformers'
/// GPT-2 views its projections' [rows, N] as [batch, tokens, N]), which the
/// lowering looks through. The lowering folds each only while it is its
/// operand's one use, so replaying it alone would give the GEMM's result a
/// second use, unfold it and round differently from a step without
/// recompute.
bool isFoldedIntoGemm(Operation *op) {
  auto isResidualAdd = [](Operation *user) {
    auto add = dyn_cast<graph::AddOp>(user);
    return add && add.getLhs().getType() == add.getRhs().getType();
  };
  if (auto reshape = dyn_cast<graph::ReshapeOp>(op))
    return reshape.getResult().hasOneUse() && isResidualAdd(*reshape.getResult().getUsers().begin()) &&
           isFoldableGemmResult(reshape.getInput());
  auto add = dyn_cast<graph::AddOp>(op);
  if (!add)
    return false;
  for (Value operand : {add.getLhs(), add.getRhs()}) {
    if (!operand.hasOneUse())
      continue;
    if (operand.getDefiningOp<graph::MatmulOp>())
      return true;
    if (!isResidualAdd(add))
      continue;
    if (auto bias = operand.getDefiningOp<graph::AddOp>(); bias && isFoldedIntoGemm(bias))
      return true;
    if (auto reshape = operand.getDefiningOp<graph::ReshapeOp>(); reshape && isFoldableGemmResult(reshape.getInput()))
      return true;
  }
  return false;
}

/// A cast of a parameter argument (mixed precision's reads): a read of the
/// parameter itself, neither part of a segment nor replayed.
bool isParameterCast(Operation *op) {
  auto cast = dyn_cast<graph::CastOp>(op);
  return cast && isa<BlockArgument>(cast.getInput());
}

bool usesUnit(Operation *op, FlatSymbolRefAttr unit) {
  auto uses = op->getAttrOfType<ArrayAttr>(fsdp::kUsesAttr);
  return uses && llvm::is_contained(uses.getValue(), unit);
}

/// Whether the ONNX node an op came from lies in `module`: torch's exporter
/// names nodes after the module path (`/blocks.0/attn/Softmax` is in
/// `blocks.0`), which places ops that read no parameter, such as a block's
/// closing residual add.
bool fromModule(Location loc, StringRef module) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().getValue().starts_with(("/" + module + "/").str());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return llvm::any_of(fused.getLocations(), [&](Location part) { return fromModule(part, module); });
  return false;
}

struct FsdpRecomputePass : public fsdpc::fsdp::impl::FsdpRecomputeBase<FsdpRecomputePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Clause> clauses;
    if (failed(parsePolicy(module, clauses)))
      return signalPassFailure();
    if (clauses.empty())
      return;
    func::FuncOp train = graph::lookupFunction(module, graph::kTrainStepFunc, "fsdp-recompute");
    if (!train)
      return signalPassFailure();
    int lossIndex = graph::findResultWithAttr(train, graph::kLossAttr);
    if (lossIndex < 0) {
      train.emitError("fsdp-recompute: @train_step returns no graph.loss result");
      return signalPassFailure();
    }
    Block &body = train.getBody().front();
    for (Operation &op : body)
      if (op.hasAttr(graph::kMicroLossAttr)) {
        train.emitError("fsdp-recompute: must run before graph-accumulate, on one micro-batch's step");
        return signalPassFailure();
      }
    Operation *lossOp = body.getTerminator()->getOperand(lossIndex).getDefiningOp();
    if (!lossOp)
      return;
    auto inBackward = [&](Operation *op) { return lossOp->isBeforeInBlock(op); };

    // Each chosen unit's segment, checked to be disjoint from the others.
    struct Segment {
      fsdp::UnitOp unit;
      Mode mode;
      Operation *first, *last;
    };
    SmallVector<Segment> segments;
    for (fsdp::UnitOp unit : module.getOps<fsdp::UnitOp>()) {
      Mode mode = Mode::kKeep;
      for (Clause &clause : clauses)
        if (clause.regex.match(unit.getSymName())) {
          mode = clause.mode;
          break;
        }
      if (mode == Mode::kKeep)
        continue;
      auto symbol = FlatSymbolRefAttr::get(unit.getSymNameAttr());
      Operation *first = nullptr, *last = nullptr;
      for (Operation &op : body) {
        if (&op == lossOp || inBackward(&op))
          break;
        if ((!usesUnit(&op, symbol) && !fromModule(op.getLoc(), unit.getSymName())) || isParameterCast(&op))
          continue;
        first = first ? first : &op;
        last = &op;
      }
      if (!first)
        continue; // its parameters are not read in forward
      for (Segment &other : segments)
        if (!(last->isBeforeInBlock(other.first) || other.last->isBeforeInBlock(first))) {
          unit.emitOpError("fsdp-recompute: the forward of unit @")
              << unit.getSymName() << " overlaps that of @" << other.unit.getSymName()
              << "; recompute units whose forward segments are disjoint";
          return signalPassFailure();
        }
      segments.push_back({unit, mode, first, last});
    }
    for (const Segment &segment : segments)
      replay(body, segment.unit, segment.mode, segment.first, segment.last, inBackward);
  }

  LogicalResult parsePolicy(ModuleOp module, SmallVectorImpl<Clause> &clauses) {
    llvm::StringRef text(policy);
    if (text.empty() || text == "none")
      return success();
    SmallVector<llvm::StringRef> parts;
    text.split(parts, ';', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef part : parts) {
      Mode mode;
      if (part.consume_front("units:"))
        mode = Mode::kFull;
      else if (part.consume_front("cheap:"))
        mode = Mode::kCheap;
      else
        return module.emitError("fsdp-recompute: policy clause '")
               << part << "' is not units:REGEX or cheap:REGEX";
      std::string anchored = "^(" + part.str() + ")$";
      llvm::Regex regex(anchored);
      std::string error;
      if (!regex.isValid(error))
        return module.emitError("fsdp-recompute: bad regex '") << part << "': " << error;
      clauses.push_back({mode, std::move(regex)});
    }
    return success();
  }

  /// Clones what backward reads of [first, last] right before its first
  /// backward reader and points backward at the clones.
  template <typename InBackward>
  void replay(Block &body, fsdp::UnitOp unit, Mode mode, Operation *first, Operation *last, InBackward inBackward) {
    llvm::SetVector<Operation *> segment;
    for (Operation *op = first;; op = op->getNextNode()) {
      if (!isa<graph::ConstantOp>(op) && !isParameterCast(op) && op->getNumResults() > 0)
        segment.insert(op);
      if (op == last)
        break;
    }
    // Whether a segment op's results are replayed: all of them in a full
    // replay; all but the GEMMs' and attention's in a cheap one.
    auto replayed = [&](Operation *op) {
      return segment.contains(op) && (mode == Mode::kFull || (!isExpensive(op) && !isFoldedIntoGemm(op)));
    };

    // The values backward reads, and the ops that recompute them.
    SmallVector<Value> needed;
    Operation *insertBefore = nullptr;
    for (Operation *op : segment) {
      if (!replayed(op))
        continue;
      for (Value result : op->getResults()) {
        bool readInBackward = false;
        for (Operation *user : result.getUsers())
          if (inBackward(user)) {
            readInBackward = true;
            if (!insertBefore || user->isBeforeInBlock(insertBefore))
              insertBefore = user;
          }
        if (readInBackward)
          needed.push_back(result);
      }
    }
    if (needed.empty())
      return;
    llvm::SetVector<Operation *> toClone;
    SmallVector<Operation *> worklist;
    for (Value v : needed)
      worklist.push_back(v.getDefiningOp());
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!replayed(op) || !toClone.insert(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          worklist.push_back(def);
    }

    OpBuilder builder(insertBefore);
    IRMapping mapping;
    auto mark = FlatSymbolRefAttr::get(unit.getSymNameAttr());
    SmallVector<Operation *> clones;
    for (Operation *op : segment) // program order
      if (toClone.contains(op)) {
        Operation *clone = builder.clone(*op, mapping);
        clone->setAttr(fsdp::kRecomputeAttr, mark);
        clones.push_back(clone);
      }
    for (Value v : needed) {
      Value replacement = mapping.lookup(v);
      v.replaceUsesWithIf(replacement, [&](OpOperand &use) {
        Operation *user = use.getOwner();
        return inBackward(user) && !llvm::is_contained(clones, user);
      });
    }
  }
};

} // namespace
