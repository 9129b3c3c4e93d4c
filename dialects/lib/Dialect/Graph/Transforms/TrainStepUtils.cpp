#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace fsdpc::graph {

func::FuncOp lookupFunction(ModuleOp module, StringRef name, StringRef pass) {
  auto func = module.lookupSymbol<func::FuncOp>(name);
  if (!func)
    module.emitError() << pass << ": the module has no function @" << name;
  return func;
}

void setReturnedValues(func::FuncOp func, ArrayRef<Value> values, ArrayRef<DictionaryAttr> attrs) {
  Operation *terminator = func.getBody().front().getTerminator();
  OpBuilder builder(terminator);
  func::ReturnOp::create(builder, terminator->getLoc(), values);
  terminator->erase();
  SmallVector<Type> resultTypes;
  for (Value v : values)
    resultTypes.push_back(v.getType());
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(), resultTypes));
  func.setAllResultAttrs(attrs);
}

BlockArgument appendArgument(func::FuncOp func, Type type, DictionaryAttr attrs) {
  unsigned index = func.getNumArguments();
  (void)func.insertArgument(index, type, attrs, func.getLoc());
  return func.getArgument(index);
}

SmallVector<NamedAttribute> ownAttributes(Operation *op) {
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute attr : op->getAttrDictionary())
    if (!attr.getName().getValue().contains('.'))
      attrs.push_back(attr);
  return attrs;
}

bool isBufferUpdate(func::FuncOp func, unsigned result) {
  auto target = func.getResultAttrOfType<IntegerAttr>(result, kUpdatesAttr);
  return target && func.getArgAttr(target.getInt(), kBufferAttr);
}

void appendBufferUpdates(func::FuncOp func, SmallVectorImpl<Value> &values, SmallVectorImpl<DictionaryAttr> &attrs) {
  Operation *terminator = func.getBody().front().getTerminator();
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (isBufferUpdate(func, i)) {
      values.push_back(terminator->getOperand(i));
      attrs.push_back(func.getResultAttrDict(i));
    }
}

int findResultWithAttr(func::FuncOp func, StringRef attrName) {
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (func.getResultAttr(i, attrName))
      return i;
  return -1;
}

StepPhases::StepPhases(func::FuncOp train) {
  Block &body = train.getBody().front();
  for (Operation &op : body) {
    if (op.hasAttr(kMicroLossAttr))
      losses_.push_back(&op);
    if (auto micro = op.getAttrOfType<IntegerAttr>(kMicroBatchAttr); micro && micro.getInt() > 0)
      starts_.push_back(&op);
  }
  if (losses_.empty()) {
    int lossIndex = findResultWithAttr(train, kLossAttr);
    if (lossIndex >= 0)
      if (Operation *loss = body.getTerminator()->getOperand(lossIndex).getDefiningOp())
        losses_.push_back(loss);
  }
}

int64_t StepPhases::phaseOf(Operation *op) const {
  Operation *inBlock = losses_.empty() ? op : losses_.front()->getBlock()->findAncestorOpInBlock(*op);
  if (!inBlock)
    return 0;
  int64_t phase = 0;
  for (Operation *loss : losses_)
    phase += loss->isBeforeInBlock(inBlock); // after a micro-batch's loss: its backward
  for (Operation *start : starts_)
    phase += start == inBlock || start->isBeforeInBlock(inBlock); // from a micro-batch's first op: its forward
  return phase;
}

} // namespace fsdpc::graph
