#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"

#include "fsdpc/Dialect/Graph/IR/GraphOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace fsdpc::graph;

#include "fsdpc/Dialect/Graph/IR/GraphEnums.cpp.inc"
#include "fsdpc/Dialect/Graph/IR/GraphOpsDialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "fsdpc/Dialect/Graph/IR/GraphAttrs.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdpc/Dialect/Graph/IR/GraphOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdpc/Dialect/Graph/IR/GraphAttrs.cpp.inc"
      >();
}

Operation *GraphDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
