#include "fsdpc/Dialect/Fsdp/IR/FsdpDialect.h"

#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

using namespace mlir;
using namespace fsdpc::fsdp;

#include "fsdpc/Dialect/Fsdp/IR/FsdpOpsDialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "fsdpc/Dialect/Fsdp/IR/FsdpAttrs.cpp.inc"

void FsdpDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdpc/Dialect/Fsdp/IR/FsdpAttrs.cpp.inc"
      >();
}

namespace {

int64_t flatSize(Value value) { return cast<RankedTensorType>(value.getType()).getDimSize(0); }

LogicalResult verifyGroup(Operation *op, int64_t groupSize, int64_t groupStride) {
  if (groupSize < 1 || groupStride < 1)
    return op->emitOpError("group_size and group_stride must be positive, got ") << groupSize << " and " << groupStride;
  return success();
}

LogicalResult verifyUnitUse(Operation *op, SymbolTableCollection &symbolTable, FlatSymbolRefAttr unit) {
  if (!symbolTable.lookupNearestSymbolFrom<UnitOp>(op, unit))
    return op->emitOpError("references an undefined unit ") << unit;
  return success();
}

/// `full` must be `groupSize` shards.
LogicalResult verifyShardSizes(Operation *op, int64_t full, int64_t shard, int64_t groupSize) {
  if (full != shard * groupSize)
    return op->emitOpError("full size ") << full << " must be group_size (" << groupSize << ") times the shard size ("
                                         << shard << ")";
  return success();
}

} // namespace

LogicalResult UnitOp::verify() {
  if (getParams().empty())
    return emitOpError("must hold at least one parameter");
  if (getParamTypes().size() != getParams().size())
    return emitOpError("has ") << getParams().size() << " parameters but " << getParamTypes().size() << " types";
  int64_t total = 0;
  for (Attribute attr : getParamTypes()) {
    auto type = dyn_cast<RankedTensorType>(cast<TypeAttr>(attr).getValue());
    if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
      return emitOpError("parameter types must be static f32 tensors, got ") << attr;
    total += type.getNumElements();
  }
  if (total != getFlatSize())
    return emitOpError("flat_size (") << getFlatSize() << ") must be the parameters' element count (" << total << ")";
  if (getFlatSize() < 1 || getPaddedSize() < getFlatSize())
    return emitOpError("padded_size (") << getPaddedSize() << ") must be at least flat_size (" << getFlatSize()
                                        << ") and flat_size positive";
  return success();
}

static Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// Collectives move one element type: mixed precision casts around them.
static LogicalResult verifySameElementType(Operation *op, Value input, Value result) {
  if (elementOf(input) != elementOf(result))
    return op->emitOpError("input and result element types differ: ") << elementOf(input) << " vs "
                                                                      << elementOf(result);
  return success();
}

LogicalResult ShardOp::verify() {
  if (getGroupSize() < 1)
    return emitOpError("group_size must be positive");
  return verifyShardSizes(*this, flatSize(getInput()), flatSize(getResult()), getGroupSize());
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyGroup(*this, getGroupSize(), getGroupStride())) ||
      failed(verifySameElementType(*this, getShard(), getResult())))
    return failure();
  return verifyShardSizes(*this, flatSize(getResult()), flatSize(getShard()), getGroupSize());
}
LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyUnitUse(*this, symbolTable, getUnitAttr());
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyGroup(*this, getGroupSize(), getGroupStride())) ||
      failed(verifySameElementType(*this, getInput(), getResult())))
    return failure();
  return verifyShardSizes(*this, flatSize(getInput()), flatSize(getResult()), getGroupSize());
}
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyUnitUse(*this, symbolTable, getUnitAttr());
}

LogicalResult AllReduceOp::verify() {
  return verifyGroup(*this, getGroupSize(), getGroupStride());
}
LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (!getUnitAttr())
    return success();
  return verifyUnitUse(*this, symbolTable, getUnitAttr());
}

LogicalResult ParamViewOp::verify() {
  if (failed(verifySameElementType(*this, getFlat(), getResult())))
    return failure();
  const int64_t count = cast<RankedTensorType>(getResult().getType()).getNumElements();
  if (getOffset() < 0 || getOffset() + count > flatSize(getFlat()))
    return emitOpError("elements [") << getOffset() << ", " << getOffset() + count << ") are outside the flat tensor of "
                                     << flatSize(getFlat()) << " elements";
  return success();
}

LogicalResult FlattenOp::verify() {
  int64_t total = 0;
  for (Value grad : getGrads()) {
    if (failed(verifySameElementType(*this, grad, getResult())))
      return failure();
    total += cast<RankedTensorType>(grad.getType()).getNumElements();
  }
  if (total > flatSize(getResult()))
    return emitOpError("gradients of ") << total << " elements do not fit a flat tensor of " << flatSize(getResult());
  return success();
}
LogicalResult FlattenOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto unit = symbolTable.lookupNearestSymbolFrom<UnitOp>(*this, getUnitAttr());
  if (!unit)
    return emitOpError("references an undefined unit ") << getUnitAttr();
  if (unit.getParamTypes().size() != getGrads().size())
    return emitOpError("has ") << getGrads().size() << " gradients for the " << unit.getParamTypes().size()
                               << " parameters of " << getUnitAttr();
  // Gradients have their parameter's shape; under mixed precision with a
  // low-precision reduce dtype they are flattened in that dtype.
  for (auto [grad, type] : llvm::zip(getGrads(), unit.getParamTypes()))
    if (cast<ShapedType>(grad.getType()).getShape() != cast<ShapedType>(cast<TypeAttr>(type).getValue()).getShape())
      return emitOpError("gradient type ") << grad.getType() << " does not match its parameter's type "
                                           << cast<TypeAttr>(type).getValue();
  if (flatSize(getResult()) != unit.getPaddedSize())
    return emitOpError("result must have the unit's padded_size (") << unit.getPaddedSize() << ") elements";
  return success();
}

SmallVector<Operation *> BucketOp::getMembers() {
  SmallVector<Operation *> members;
  for (Operation &op : getBody().front().without_terminator())
    members.push_back(&op);
  return members;
}

std::optional<CollectiveShape> fsdpc::fsdp::collectiveShapeOf(Operation *op) {
  if (auto gather = dyn_cast<AllGatherOp>(op))
    return CollectiveShape{gather.getGroupSize(), gather.getGroupStride(), std::nullopt, elementOf(gather.getShard()),
                           gather.getUnitAttr(), gather.getResult()};
  if (auto scatter = dyn_cast<ReduceScatterOp>(op))
    return CollectiveShape{scatter.getGroupSize(), scatter.getGroupStride(), scatter.getReduction(),
                           elementOf(scatter.getInput()), scatter.getUnitAttr(), scatter.getInput()};
  if (auto reduce = dyn_cast<AllReduceOp>(op))
    return CollectiveShape{reduce.getGroupSize(), reduce.getGroupStride(), reduce.getReduction(),
                           elementOf(reduce.getInput()), reduce.getUnitAttr(), reduce.getInput()};
  return std::nullopt;
}

LogicalResult BucketOp::verify() {
  SmallVector<Operation *> members = getMembers();
  if (members.size() < 2)
    return emitOpError("must hold at least two collectives, got ") << members.size();
  std::optional<CollectiveShape> first = collectiveShapeOf(members.front());
  llvm::SmallDenseSet<Attribute> units;
  for (Operation *member : members) {
    std::optional<CollectiveShape> shape = collectiveShapeOf(member);
    if (!shape)
      return emitOpError("may hold only fsdp.all_gather, fsdp.reduce_scatter or fsdp.all_reduce, got ")
             << member->getName();
    if (member->getName() != members.front()->getName())
      return emitOpError("members must be one kind of collective, got ")
             << members.front()->getName() << " and " << member->getName();
    if (!shape->sharesGroupWith(*first))
      return emitOpError("members must share group, reduction and element type; ")
             << shape->unit << " differs from " << first->unit;
    if (!units.insert(shape->unit).second)
      return emitOpError("holds unit ") << shape->unit << " twice";
    for (Value operand : member->getOperands())
      if (operand.getParentRegion() == &getBody())
        return emitOpError("members must read values from outside the bucket");
  }
  Operation *yield = getBody().front().getTerminator();
  if (!isa<YieldOp>(yield) || yield->getNumOperands() != members.size())
    return emitOpError("must end in an fsdp.yield of its ") << members.size() << " members' results";
  for (auto [i, member] : llvm::enumerate(members))
    if (yield->getOperand(i) != member->getResult(0))
      return emitOpError("yield operand ") << i << " must be the result of member " << i;
  if (TypeRange(yield->getOperandTypes()) != getResultTypes())
    return emitOpError("result types must be the yielded types");
  return success();
}

/// The all_gather that produced `value`, directly or as a bucket's result.
static AllGatherOp gatherOf(Value value) {
  if (auto gather = value.getDefiningOp<AllGatherOp>())
    return gather;
  if (auto bucket = value.getDefiningOp<BucketOp>()) {
    Operation *yield = bucket.getBody().front().getTerminator();
    unsigned index = cast<OpResult>(value).getResultNumber();
    if (index < yield->getNumOperands())
      return yield->getOperand(index).getDefiningOp<AllGatherOp>();
  }
  return {};
}

LogicalResult FreeOp::verify() {
  if (!gatherOf(getValue()))
    return emitOpError("operand must be the result of fsdp.all_gather");
  // Nothing may read the value, or a view of it, after it is freed.
  SmallVector<Value> readers = {getValue()};
  for (Operation *user : getValue().getUsers())
    if (auto view = dyn_cast<ParamViewOp>(user))
      readers.push_back(view.getResult());
  for (Value value : readers)
    for (Operation *user : value.getUsers())
      if (user != getOperation() && user->getBlock() == getOperation()->getBlock() &&
          getOperation()->isBeforeInBlock(user))
        return emitOpError("value is used after it is freed");
  return success();
}

#define GET_OP_CLASSES
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.cpp.inc"
