//===- Wrap.cpp - fsdp-wrap -----------------------------------------------===//
//
// Groups the trainable parameters of @train_step into sharding units by
// PyTorch FSDP's auto-wrap policies, expressed on parameter names.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"

#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Regex.h"

namespace fsdpc::fsdp {
#define GEN_PASS_DEF_FSDPWRAP
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h.inc"
} // namespace fsdpc::fsdp

using namespace mlir;
using namespace fsdpc;

namespace {

using fsdp::kUnitAttr;
using fsdp::kUsesAttr;

struct Param {
  BlockArgument arg;
  std::string name;
  std::string module; // the name without its last component
  int64_t numel;
};

struct Unit {
  std::string name;
  SmallVector<size_t> params;
};

std::string moduleOf(StringRef name) {
  size_t dot = name.rfind('.');
  return dot == StringRef::npos ? "" : name.substr(0, dot).str();
}

struct FsdpWrapPass : public fsdpc::fsdp::impl::FsdpWrapBase<FsdpWrapPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp train = graph::lookupFunction(module, graph::kTrainStepFunc, "fsdp-wrap");
    if (!train)
      return signalPassFailure();
    std::vector<Param> params;
    for (BlockArgument arg : train.getArguments())
      if (auto name = train.getArgAttrOfType<StringAttr>(arg.getArgNumber(), graph::kParamAttr)) {
        auto hint = train.getArgAttrOfType<StringAttr>(arg.getArgNumber(), graph::kModuleAttr);
        params.push_back({arg, name.str(), hint ? hint.str() : moduleOf(name.getValue()),
                          cast<RankedTensorType>(arg.getType()).getNumElements()});
      }

    std::vector<Unit> units;
    Unit root{"root", {}};
    if (failed(group(module, params, units, root)))
      return signalPassFailure();
    if (!root.params.empty())
      units.push_back(root);

    // Declare the units, then tag parameters and the ops that read them.
    OpBuilder builder(module.getContext());
    builder.setInsertionPointToStart(module.getBody());
    SymbolTable symbols(module);
    DenseMap<Value, FlatSymbolRefAttr> unitOfParam;
    for (Unit &unit : units) {
      SmallVector<Attribute> names, types;
      int64_t flatSize = 0;
      for (size_t i : unit.params) {
        names.push_back(builder.getStringAttr(params[i].name));
        types.push_back(TypeAttr::get(params[i].arg.getType()));
        flatSize += params[i].numel;
      }
      auto op = fsdp::UnitOp::create(builder, train.getLoc(), builder.getStringAttr(unit.name),
                                     builder.getArrayAttr(names), builder.getArrayAttr(types),
                                     builder.getI64IntegerAttr(flatSize), builder.getI64IntegerAttr(flatSize));
      symbols.insert(op); // uniquifies a name that clashes
      auto ref = FlatSymbolRefAttr::get(op.getSymNameAttr());
      for (size_t i : unit.params) {
        train.setArgAttr(params[i].arg.getArgNumber(), kUnitAttr, ref);
        unitOfParam[params[i].arg] = ref;
      }
    }
    train.walk([&](Operation *op) {
      llvm::SetVector<Attribute> used;
      for (Value operand : op->getOperands())
        if (FlatSymbolRefAttr unit = unitOfParam.lookup(operand))
          used.insert(unit);
      if (!used.empty() && !isa<func::ReturnOp>(op))
        op->setAttr(kUsesAttr, builder.getArrayAttr(used.getArrayRef()));
    });
  }

  LogicalResult group(ModuleOp module, const std::vector<Param> &params, std::vector<Unit> &units, Unit &root) {
    StringRef text(policy);
    if (text == "none") {
      for (size_t i = 0; i < params.size(); ++i)
        root.params.push_back(i);
      return success();
    }
    if (text.consume_front("size:")) {
      int64_t minParams;
      if (text.getAsInteger(10, minParams) || minParams < 1)
        return module.emitError() << "fsdp-wrap: size:N needs a positive integer N, got '" << text << "'";
      Unit current;
      int64_t count = 0;
      for (size_t i = 0; i < params.size(); ++i) {
        current.params.push_back(i);
        count += params[i].numel;
        bool moduleEnds = i + 1 == params.size() || params[i + 1].module != params[i].module;
        if (moduleEnds && count >= minParams) {
          current.name = "unit" + std::to_string(units.size());
          units.push_back(current);
          current = Unit();
          count = 0;
        }
      }
      root.params = current.params;
      return success();
    }
    if (text.consume_front("module:")) {
      llvm::Regex regex(("^(" + text + ")$").str());
      std::string error;
      if (!regex.isValid(error))
        return module.emitError() << "fsdp-wrap: module:" << text << " is not a valid regex: " << error;
      llvm::StringMap<size_t> unitOfModule;
      for (size_t i = 0; i < params.size(); ++i) {
        // The innermost module prefix of the name that matches.
        std::string match;
        for (std::string prefix = params[i].module; !prefix.empty(); prefix = moduleOf(prefix)) {
          if (regex.match(prefix)) {
            match = prefix;
            break;
          }
        }
        if (match.empty()) {
          root.params.push_back(i);
          continue;
        }
        auto [it, inserted] = unitOfModule.try_emplace(match, units.size());
        if (inserted)
          units.push_back({match, {}});
        units[it->second].params.push_back(i);
      }
      return success();
    }
    return module.emitError() << "fsdp-wrap: unknown policy '" << policy << "' (expected none, size:N or module:REGEX)";
  }
};

} // namespace
