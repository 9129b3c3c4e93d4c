//===- GraphToPlan.cpp - convert-graph-to-plan ----------------------------===//
#include "fsdpc/Conversion/Passes.h"

#include "fsdpc/Dialect/Graph/IR/GraphOps.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "fsdpc/Dialect/Plan/IR/PlanOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace fsdpc {
#define GEN_PASS_DEF_CONVERTGRAPHTOPLAN
#include "fsdpc/Conversion/Passes.h.inc"
} // namespace fsdpc

using namespace mlir;
using namespace fsdpc;
using plan_ir::TensorKind;

namespace {

/// An op's kernel parameters: its own attributes, not the dialect-prefixed
/// annotations other passes attach (such as `fsdp.uses`).
SmallVector<NamedAttribute> kernelParams(Operation *op) {
  SmallVector<NamedAttribute> params;
  for (NamedAttribute attr : op->getAttrDictionary())
    if (!attr.getName().getValue().contains('.'))
      params.push_back(attr);
  return params;
}

class Lowering {
public:
  Lowering(ModuleOp module, func::FuncOp train, int64_t worldSize)
      : module_(module), train_(train), worldSize_(worldSize), builder_(module.getContext()) {}

  LogicalResult run();

private:
  plan_ir::TensorOp addTensor(StringRef name, TensorKind kind, Type type, Location loc) {
    builder_.setInsertionPointToEnd(&program_.getBlock());
    auto tensor = plan_ir::TensorOp::create(builder_, loc, builder_.getStringAttr(name),
                                            plan_ir::TensorKindAttr::get(builder_.getContext(), kind),
                                            TypeAttr::get(type), StringAttr(), ElementsAttr(), StringAttr(),
                                            StringAttr(), IntegerAttr());
    symbols_->insert(tensor); // renames on a clash
    return tensor;
  }
  FlatSymbolRefAttr ref(plan_ir::TensorOp tensor) { return FlatSymbolRefAttr::get(tensor.getSymNameAttr()); }
  FlatSymbolRefAttr transientFor(Value value) {
    plan_ir::TensorOp tensor = addTensor("t" + std::to_string(nextTransient_++), TensorKind::transient,
                                         value.getType(), value.getLoc());
    tensors_[value] = ref(tensor);
    return ref(tensor);
  }
  void addKernel(StringRef kernel, ArrayRef<Attribute> inputs, ArrayRef<Attribute> outputs, Location loc,
                 ArrayRef<NamedAttribute> params) {
    builder_.setInsertionPointToEnd(&program_.getBlock());
    auto op = plan_ir::KernelOp::create(builder_, loc, builder_.getStringAttr(kernel), builder_.getArrayAttr(inputs),
                                        builder_.getArrayAttr(outputs),
                                        plan_ir::StreamAttr::get(builder_.getContext(), plan_ir::Stream::compute));
    for (NamedAttribute param : params)
      op->setAttr(param.getName(), param.getValue());
  }
  LogicalResult lowerArguments();
  LogicalResult lowerOp(Operation *op);

  ModuleOp module_;
  func::FuncOp train_;
  int64_t worldSize_;
  OpBuilder builder_;
  plan_ir::ProgramOp program_;
  std::unique_ptr<SymbolTable> symbols_;
  llvm::DenseMap<Value, FlatSymbolRefAttr> tensors_;
  int nextTransient_ = 0;
  int64_t localBatch_ = 0;
};

LogicalResult Lowering::lowerArguments() {
  for (BlockArgument arg : train_.getArguments()) {
    unsigned i = arg.getArgNumber();
    Location loc = arg.getLoc();
    plan_ir::TensorOp tensor;
    if (auto name = train_.getArgAttrOfType<StringAttr>(i, graph::kInputAttr)) {
      tensor = addTensor(name.getValue(), TensorKind::input, arg.getType(), loc);
      tensor.setSourceNameAttr(name);
      auto shape = cast<RankedTensorType>(arg.getType()).getShape();
      if (!shape.empty() && localBatch_ == 0)
        localBatch_ = shape[0];
    } else if (auto name = train_.getArgAttrOfType<StringAttr>(i, graph::kParamAttr)) {
      tensor = addTensor(name.getValue(), TensorKind::parameter, arg.getType(), loc);
      tensor.setSourceNameAttr(name);
    } else if (auto name = train_.getArgAttrOfType<StringAttr>(i, graph::kFrozenParamAttr)) {
      tensor = addTensor(name.getValue(), TensorKind::frozen_parameter, arg.getType(), loc);
      tensor.setSourceNameAttr(name);
    } else if (auto owner = train_.getArgAttrOfType<StringAttr>(i, graph::kStateOfAttr)) {
      auto slot = train_.getArgAttrOfType<StringAttr>(i, graph::kStateSlotAttr);
      if (!slot)
        return train_.emitError("convert-graph-to-plan: optimizer state argument ") << i << " has no graph.state_slot";
      tensor = addTensor((owner.getValue() + "." + slot.getValue()).str(), TensorKind::optimizer_state, arg.getType(),
                         loc);
      tensor.setOwnerAttr(owner);
      tensor.setOptimizerSlotAttr(slot);
    } else if (train_.getArgAttr(i, graph::kStepAttr)) {
      tensor = addTensor("step", TensorKind::step_counter, arg.getType(), loc);
    } else {
      return train_.emitError("convert-graph-to-plan: argument ") << i << " has no graph.input, graph.param, "
                                                                   << "graph.state_of or graph.step attribute";
    }
    tensors_[arg] = ref(tensor);
  }
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  Location loc = op->getLoc();
  SmallVector<Attribute> inputs;
  for (Value operand : op->getOperands())
    inputs.push_back(tensors_.lookup(operand));

  if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (dense && dense.isSplat() && dense.getElementType().isF32()) {
      FlatSymbolRefAttr out = transientFor(constant.getResult());
      double value = dense.getSplatValue<APFloat>().convertToDouble();
      addKernel("fill", {}, {out}, loc, {builder_.getNamedAttr("value", builder_.getF64FloatAttr(value))});
      return success();
    }
    plan_ir::TensorOp tensor = addTensor("const" + std::to_string(nextTransient_++), TensorKind::constant,
                                         constant.getType(), loc);
    tensor.setValueAttr(constant.getValue());
    tensors_[constant.getResult()] = ref(tensor);
    return success();
  }

  // Optimizer updates write their parameter and state in place: their
  // results are the tensors of the operands they replace.
  if (isa<graph::AdamwUpdateOp, graph::SgdUpdateOp>(op)) {
    SmallVector<Attribute> outputs;
    SmallVector<Value> replaced = {op->getOperand(0)};
    if (auto adamw = dyn_cast<graph::AdamwUpdateOp>(op))
      replaced.append({adamw.getExpAvg(), adamw.getExpAvgSq()});
    else
      llvm::append_range(replaced, cast<graph::SgdUpdateOp>(op).getState());
    for (auto [result, old] : llvm::zip(op->getResults(), replaced)) {
      for (Operation *user : old.getUsers())
        if (user != op && op->isBeforeInBlock(user))
          return op->emitOpError("convert-graph-to-plan: the value updated in place is read after the update");
      tensors_[result] = tensors_.lookup(old);
      outputs.push_back(tensors_.lookup(old));
    }
    addKernel(op->getName().stripDialect(), inputs, outputs, loc, kernelParams(op));
    return success();
  }

  if (op->getDialect()->getNamespace() != "graph")
    return op->emitOpError("convert-graph-to-plan: cannot lower this op");

  SmallVector<Attribute> outputs;
  for (Value result : op->getResults())
    outputs.push_back(transientFor(result));
  // A reshape is a copy into the new shape; other ops keep their attributes
  // (the plan writer turns `reduction` into the runtime's `mean` flag).
  if (isa<graph::ReshapeOp>(op))
    addKernel("copy", inputs, outputs, loc, {});
  else
    addKernel(op->getName().stripDialect(), inputs, outputs, loc, kernelParams(op));
  return success();
}

LogicalResult Lowering::run() {
  int lossIndex = -1;
  for (unsigned i = 0; i < train_.getNumResults(); ++i)
    if (train_.getResultAttr(i, graph::kLossAttr))
      lossIndex = i;
  if (lossIndex < 0)
    return train_.emitError("convert-graph-to-plan: @train_step returns no graph.loss result");

  auto stringAttr = [&](StringRef name) {
    auto attr = module_->getAttrOfType<StringAttr>(name);
    return attr ? attr : builder_.getStringAttr("");
  };
  auto classes = module_->getAttrOfType<IntegerAttr>(graph::kNumClassesAttr);
  builder_.setInsertionPointToEnd(module_.getBody());
  program_ = plan_ir::ProgramOp::create(
      builder_, train_.getLoc(), builder_.getStringAttr(graph::kTrainStepFunc), builder_.getI64IntegerAttr(worldSize_),
      builder_.getI64IntegerAttr(1), FlatSymbolRefAttr::get(builder_.getContext(), "pending"),
      stringAttr(graph::kLossKindAttr), stringAttr(graph::kOptimizerAttr),
      builder_.getI64IntegerAttr(classes ? classes.getInt() : 0), IntegerAttr(), IntegerAttr());
  program_.getBody().emplaceBlock();
  symbols_ = std::make_unique<SymbolTable>(program_);

  if (failed(lowerArguments()))
    return failure();
  for (Operation &op : train_.getBody().front().without_terminator())
    if (failed(lowerOp(&op)))
      return failure();

  Operation *terminator = train_.getBody().front().getTerminator();
  for (unsigned i = 0; i < train_.getNumResults(); ++i) {
    auto updates = train_.getResultAttrOfType<IntegerAttr>(i, graph::kUpdatesAttr);
    if (!updates)
      continue;
    FlatSymbolRefAttr target = tensors_.lookup(train_.getArgument(updates.getInt()));
    FlatSymbolRefAttr value = tensors_.lookup(terminator->getOperand(i));
    if (value != target)
      addKernel("copy", {value}, {target}, terminator->getLoc(), {});
  }
  program_.setLossAttr(tensors_.lookup(terminator->getOperand(lossIndex)));
  program_.setGlobalBatch(std::max<int64_t>(localBatch_, 1) * worldSize_);
  train_.erase();
  return success();
}

struct ConvertGraphToPlanPass : public fsdpc::impl::ConvertGraphToPlanBase<ConvertGraphToPlanPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp train = graph::lookupFunction(module, graph::kTrainStepFunc, "convert-graph-to-plan");
    if (!train)
      return signalPassFailure();
    if (worldSize < 1) {
      module.emitError("convert-graph-to-plan: world-size must be positive");
      return signalPassFailure();
    }
    if (failed(Lowering(module, train, worldSize).run()))
      return signalPassFailure();
  }
};

} // namespace
