#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"

#include "fsdpc/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace fsdpc::graph;

#include "fsdpc/Dialect/Graph/IR/GraphOpsDialect.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdpc/Dialect/Graph/IR/GraphOps.cpp.inc"
      >();
}

Operation *GraphDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
