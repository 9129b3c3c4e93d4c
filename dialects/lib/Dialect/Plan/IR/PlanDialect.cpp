#include "fsdpc/Dialect/Plan/IR/PlanDialect.h"

#include "fsdpc/Dialect/Plan/IR/Lifetimes.h"
#include "fsdpc/Dialect/Plan/IR/PlanOps.h"
#include "fsdpc/runtime/KernelContract.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace fsdpc::plan_ir;

#include "fsdpc/Dialect/Plan/IR/PlanEnums.cpp.inc"
#include "fsdpc/Dialect/Plan/IR/PlanOpsDialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "fsdpc/Dialect/Plan/IR/PlanAttrs.cpp.inc"

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdpc/Dialect/Plan/IR/PlanOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdpc/Dialect/Plan/IR/PlanAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ProgramOp
//===----------------------------------------------------------------------===//

LogicalResult ProgramOp::verify() {
  if (getWorldSize() < 1)
    return emitOpError("world_size must be positive, got ") << getWorldSize();
  if (getGlobalBatch() < 1)
    return emitOpError("global_batch must be positive, got ") << getGlobalBatch();
  if (std::optional<int64_t> groupSize = getShardGroupSize(); groupSize && (*groupSize < 1 || getWorldSize() % *groupSize))
    return emitOpError("shard_group_size must be positive and divide world_size (")
           << getWorldSize() << "), got " << *groupSize;
  if (!getLossAttr() && (!getOutputs() || getOutputs()->empty()))
    return emitOpError("needs a loss, or outputs for a forward-only program");
  if (bool(getLossAttr()) != getLossKind().has_value())
    return emitOpError(getLossAttr() ? "has a loss but no loss_kind" : "has a loss_kind but no loss");
  if (getLossAttr()) {
    auto lossTensor = dyn_cast_if_present<TensorOp>(mlir::SymbolTable::lookupSymbolIn(*this, getLossAttr()));
    if (!lossTensor)
      return emitOpError("loss ") << getLossAttr() << " is not a plan.tensor of this program";
    if (lossTensor.getTensorType().getRank() != 0 || !lossTensor.getTensorType().getElementType().isF32())
      return emitOpError("loss must be a scalar f32 tensor, got ") << lossTensor.getType();
  }
  if (getGradNormAttr()) {
    auto norm = dyn_cast_if_present<TensorOp>(mlir::SymbolTable::lookupSymbolIn(*this, getGradNormAttr()));
    if (!norm || norm.getTensorType().getShape() != ArrayRef<int64_t>{1} ||
        !norm.getTensorType().getElementType().isF32())
      return emitOpError("grad_norm must name a tensor<1xf32> of this program");
  }
  // String tuples: [kind, name, source] and [parameter, torch name].
  auto stringTuples = [](std::optional<ArrayAttr> list, size_t size) {
    return !list || llvm::all_of(*list, [&](Attribute entry) {
      auto tuple = dyn_cast<ArrayAttr>(entry);
      return tuple && tuple.size() == size && llvm::all_of(tuple, [](Attribute a) { return isa<StringAttr>(a); });
    });
  };
  if (!stringTuples(getInitializerRewrites(), 3))
    return emitOpError("initializer_rewrites must be [kind, name, source] string triples");
  for (Attribute rewrite : getInitializerRewrites() ? getInitializerRewrites()->getValue() : ArrayRef<Attribute>()) {
    StringRef kind = cast<StringAttr>(cast<ArrayAttr>(rewrite)[0]).getValue();
    if (kind != "identity_copy" && kind != "transposed_tie")
      return emitOpError("initializer rewrite kind must be identity_copy or transposed_tie, got '") << kind << "'";
  }
  if (!stringTuples(getTorchNames(), 2))
    return emitOpError("torch_names must be [parameter, torch name] string pairs");
  if (getForwardOutputAttr() &&
      !dyn_cast_if_present<TensorOp>(mlir::SymbolTable::lookupSymbolIn(*this, getForwardOutputAttr())))
    return emitOpError("forward_output ") << getForwardOutputAttr() << " is not a plan.tensor of this program";
  if (getForwardLossAttr()) {
    auto loss = dyn_cast_if_present<TensorOp>(mlir::SymbolTable::lookupSymbolIn(*this, getForwardLossAttr()));
    if (!loss || loss.getTensorType().getRank() != 0 || !loss.getTensorType().getElementType().isF32())
      return emitOpError("forward_loss must name a scalar f32 tensor of this program");
    if (forwardPrefix(*this).loss < 1)
      return emitOpError("forward_loss ") << getForwardLossAttr() << " is written by no instruction";
  }
  if (std::optional<ArrayAttr> outputs = getOutputs())
    for (Attribute output : *outputs)
      if (!dyn_cast_if_present<TensorOp>(mlir::SymbolTable::lookupSymbolIn(*this, cast<FlatSymbolRefAttr>(output))))
        return emitOpError("output ") << output << " is not a plan.tensor of this program";

  // Once allocated, every tensor must have an offset inside its region, and
  // persistent tensors (alive for the whole run) must not overlap.
  if (!getPersistentBytes() && !getTransientBytes())
    return success();
  if (!getPersistentBytes() || !getTransientBytes())
    return emitOpError("persistent_bytes and transient_bytes must be set together");
  // The host region, like the persistent one, holds each tensor for the
  // whole run.
  std::vector<std::pair<int64_t, int64_t>> persistentRanges, hostRanges;
  for (auto tensor : getBlock().getOps<TensorOp>()) {
    if (!tensor.getOffset())
      return tensor.emitOpError("has no offset in an allocated program");
    int64_t begin = *tensor.getOffset(), end = begin + tensor.getByteSize();
    const bool onHost = tensor.isOnHost();
    int64_t limit = onHost                  ? getHostBytes().value_or(0)
                    : tensor.isPersistent() ? *getPersistentBytes()
                                            : *getTransientBytes();
    if (end > limit)
      return tensor.emitOpError("bytes [") << begin << ", " << end << ") exceed its region of " << limit << " bytes";
    if ((onHost || tensor.isPersistent()) && end > begin && tensor.getKind() != TensorKind::view)
      (onHost ? hostRanges : persistentRanges).emplace_back(begin, end);
  }
  for (auto *ranges : {&persistentRanges, &hostRanges}) {
    llvm::sort(*ranges);
    for (size_t i = 1; i < ranges->size(); ++i)
      if ((*ranges)[i].first < (*ranges)[i - 1].second)
        return emitOpError(ranges == &hostRanges ? "host" : "persistent")
               << " tensors overlap at byte " << (*ranges)[i].first;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// TensorOp
//===----------------------------------------------------------------------===//

bool fsdpc::plan_ir::isPlanElementType(Type type) {
  return type.isF32() || type.isBF16() || type.isF16() || type.isInteger(64) || type.isInteger(32) ||
         type.isInteger(1);
}

int64_t fsdpc::plan_ir::elementBytes(Type type) {
  return type.isInteger(1) ? 1 : type.getIntOrFloatBitWidth() / 8;
}

int64_t TensorOp::getByteSize() {
  RankedTensorType type = getTensorType();
  return type.getNumElements() * elementBytes(type.getElementType());
}

TensorOp TensorOp::getStorage() {
  TensorOp tensor = *this;
  for (int depth = 0; tensor && tensor.getKind() == TensorKind::view && depth < 64; ++depth)
    tensor = SymbolTable::lookupNearestSymbolFrom<TensorOp>(tensor, tensor.getViewOfAttr());
  return tensor ? tensor : *this;
}

bool TensorOp::isPersistent() {
  switch (getKind()) {
  case TensorKind::view: {
    TensorOp storage = getStorage();
    return storage != *this && storage.isPersistent();
  }
  case TensorKind::gradient:
  case TensorKind::parameter:
  case TensorKind::frozen_parameter:
  case TensorKind::buffer:
  case TensorKind::optimizer_state:
  case TensorKind::constant:
  case TensorKind::step_counter:
  case TensorKind::label_count:
    return true;
  case TensorKind::input:
  case TensorKind::transient:
    return false;
  }
  return false;
}

bool TensorOp::isOnHost() { return getStorage().getHost(); }

LogicalResult TensorOp::verify() {
  RankedTensorType type = getTensorType();
  if (!type.hasStaticShape())
    return emitOpError("requires a static shape, got ") << type;
  Type element = type.getElementType();
  if (!isPlanElementType(element))
    return emitOpError("element type must be f32, bf16, f16, i64, i32 or i1, got ") << element;
  if (getKind() == TensorKind::constant) {
    if (!getValue())
      return emitOpError("of kind constant needs a value");
    if (getValue()->getType() != type)
      return emitOpError("value type ") << getValue()->getType() << " differs from " << type;
  }
  bool needsName = getKind() == TensorKind::parameter || getKind() == TensorKind::frozen_parameter ||
                   getKind() == TensorKind::buffer || getKind() == TensorKind::input;
  if (needsName && !getSourceName())
    return emitOpError("of kind ") << stringifyTensorKind(getKind()) << " needs a source_name";
  if (getLabel() && getKind() != TensorKind::input)
    return emitOpError("of kind ") << stringifyTensorKind(getKind()) << " cannot be a label; labels are inputs";
  if (getKind() == TensorKind::optimizer_state && (!getOptimizerSlot() || !getOwner()))
    return emitOpError("of kind optimizer_state needs optimizer_slot and owner");
  if (getKind() == TensorKind::step_counter && (type.getRank() != 0 || !element.isInteger(64)))
    return emitOpError("of kind step_counter must be tensor<i64>");
  if (getKind() == TensorKind::label_count && (type.getRank() != 0 || !element.isInteger(64) || !getOwner()))
    return emitOpError("of kind label_count must be tensor<i64> with the owner whose labels it counts");
  if (getOffset() && *getOffset() < 0)
    return emitOpError("offset must be non-negative");
  if ((getKind() == TensorKind::view) != (getViewOf() && getViewOffset()))
    return emitOpError("view_of and view_offset are set exactly for kind view");
  // What --offload may move to the host: a unit's state and the copies
  // staged for host kernels. A view is where its storage is.
  if (getHost() && getKind() != TensorKind::parameter && getKind() != TensorKind::gradient &&
      getKind() != TensorKind::optimizer_state && getKind() != TensorKind::transient)
    return emitOpError("of kind ") << stringifyTensorKind(getKind())
                                   << " cannot be on the host (parameters, gradients, optimizer state and "
                                      "transients can)";
  if (getKind() == TensorKind::view) {
    auto base = SymbolTable::lookupNearestSymbolFrom<TensorOp>(*this, getViewOfAttr());
    if (!base)
      return emitOpError("is a view of ") << getViewOfAttr() << ", which is not a plan.tensor";
    if (base.getTensorType().getElementType() != element)
      return emitOpError("element type differs from its base's");
    if (*getViewOffset() < 0 || *getViewOffset() + getByteSize() > base.getByteSize())
      return emitOpError("bytes [") << *getViewOffset() << ", " << *getViewOffset() + getByteSize()
                                    << ") are outside its base of " << base.getByteSize() << " bytes";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

static LogicalResult verifyTensorRefs(Operation *op, SymbolTableCollection &symbolTable, ArrayAttr refs) {
  for (Attribute ref : refs) {
    auto symbol = cast<FlatSymbolRefAttr>(ref);
    if (!symbolTable.lookupNearestSymbolFrom<TensorOp>(op, symbol))
      return op->emitOpError("references ") << symbol << ", which is not a plan.tensor";
  }
  return success();
}

/// Whether `value` is written the way the contract's `type` says.
static bool hasContractType(Attribute value, fsdpc::contract::AttrType type) {
  using fsdpc::contract::AttrType;
  switch (type) {
  case AttrType::kBool:
    return isa<BoolAttr>(value);
  case AttrType::kInt:
    return isa<IntegerAttr>(value) && !isa<BoolAttr>(value);
  case AttrType::kFloat:
    return isa<FloatAttr>(value);
  case AttrType::kIntList:
    return isa<DenseI64ArrayAttr>(value);
  case AttrType::kString:
    return isa<StringAttr>(value);
  }
  return false;
}

LogicalResult KernelOp::verify() {
  if (getStream() != Stream::compute)
    return emitOpError("kernels run on the compute stream");
  // The kernel contract every backend implements: name, arity, parameters.
  const fsdpc::contract::KernelSignature *signature = fsdpc::contract::findKernel(getKernel().str());
  if (!signature)
    return emitOpError("unknown kernel \"") << getKernel() << "\"";
  std::string arity = fsdpc::contract::checkArity(*signature, getInputs().size(), getOutputs().size());
  if (!arity.empty())
    return emitOpError("kernel \"") << getKernel() << "\" " << arity;
  for (NamedAttribute attr : (*this)->getAttrDictionary()) {
    StringRef name = attr.getName().getValue();
    if (name == getKernelAttrName() || name == getInputsAttrName() || name == getOutputsAttrName() ||
        name == getStreamAttrName() || name == getOnHostAttrName())
      continue;
    const fsdpc::contract::AttrSpec *spec = signature->findAttr(std::string_view(name.data(), name.size()));
    if (!spec)
      return emitOpError("kernel \"") << getKernel() << "\" has no parameter '" << name << "'";
    if (!hasContractType(attr.getValue(), spec->type))
      return emitOpError("kernel \"") << getKernel() << "\" parameter '" << name << "' must be a "
                                      << std::string(fsdpc::contract::attrTypeName(spec->type)) << ", got "
                                      << attr.getValue();
  }
  for (const fsdpc::contract::AttrSpec &spec : signature->attrs)
    if (spec.required && !(*this)->hasAttr(StringRef(spec.name.data(), spec.name.size())))
      return emitOpError("kernel \"") << getKernel() << "\" needs parameter '"
                                      << StringRef(spec.name.data(), spec.name.size()) << "'";
  return success();
}

LogicalResult UnitOp::verify() {
  if (getParams().empty() || getParams().size() != getParamTypes().size())
    return emitOpError("needs one type per parameter, and at least one parameter");
  int64_t total = 0;
  for (Attribute attr : getParamTypes()) {
    auto type = dyn_cast<RankedTensorType>(cast<TypeAttr>(attr).getValue());
    if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
      return emitOpError("parameter types must be static f32 tensors, got ") << attr;
    total += type.getNumElements();
  }
  if (total != getFlatSize())
    return emitOpError("flat_size (") << getFlatSize() << ") must be the parameters' element count (" << total << ")";
  if (getPaddedSize() < getFlatSize())
    return emitOpError("padded_size (") << getPaddedSize() << ") must be at least flat_size (" << getFlatSize() << ")";
  return success();
}

LogicalResult UnitOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto shard = symbolTable.lookupNearestSymbolFrom<TensorOp>(*this, getShardAttr());
  if (!shard || shard.getKind() != TensorKind::parameter || shard.getUnit() != getName())
    return emitOpError("shard ") << getShardAttr() << " must be a parameter tensor of unit \"" << getName() << "\"";
  int64_t groupSize = 1;
  if (auto program = (*this)->getParentOfType<ProgramOp>(); program && program.getShardGroupSize())
    groupSize = *program.getShardGroupSize();
  if (shard.getTensorType().getNumElements() * groupSize != getPaddedSize())
    return emitOpError("shard of ") << shard.getTensorType().getNumElements() << " elements on " << groupSize
                                    << " rank(s) does not make padded_size " << getPaddedSize();
  return success();
}

/// Whether every tensor of `refs` is on the host (`onHost`) or none is;
/// the first that is not is named.
static LogicalResult verifyPlacement(Operation *op, SymbolTableCollection &symbolTable, ArrayAttr refs, bool onHost,
                                     StringRef what) {
  for (Attribute ref : refs) {
    auto tensor = symbolTable.lookupNearestSymbolFrom<TensorOp>(op, cast<FlatSymbolRefAttr>(ref));
    if (tensor.isOnHost() != onHost)
      return op->emitOpError(what) << " " << ref << (onHost ? ", which is in device memory" : ", which is on the host");
  }
  return success();
}

LogicalResult KernelOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (failed(verifyTensorRefs(*this, symbolTable, getInputs())) ||
      failed(verifyTensorRefs(*this, symbolTable, getOutputs())))
    return failure();
  StringRef what = getOnHost() ? "runs on the host but touches" : "runs on the device but touches";
  if (failed(verifyPlacement(*this, symbolTable, getInputs(), getOnHost(), what)))
    return failure();
  return verifyPlacement(*this, symbolTable, getOutputs(), getOnHost(), what);
}

LogicalResult CollectiveOp::verify() {
  if (getInputs().size() != 1 || getOutputs().size() != 1)
    return emitOpError("takes one input and one output");
  if (getGroupSize() < 1 || getGroupStride() < 1)
    return emitOpError("group_size and group_stride must be positive");
  bool reduces = getCollective() != CollectiveKind::all_gather;
  if (reduces != getReduction().has_value())
    return emitOpError(reduces ? "needs a reduction" : "takes no reduction");
  return success();
}

LogicalResult CollectiveOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (failed(verifyTensorRefs(*this, symbolTable, getInputs())) ||
      failed(verifyTensorRefs(*this, symbolTable, getOutputs())))
    return failure();
  if (failed(verifyPlacement(*this, symbolTable, getInputs(), false, "runs on the device but touches")))
    return failure();
  return verifyPlacement(*this, symbolTable, getOutputs(), false, "runs on the device but touches");
}

bool CopyOp::isToDevice() {
  auto source = SymbolTable::lookupNearestSymbolFrom<TensorOp>(*this, getSourceAttr());
  return source && source.isOnHost();
}

LogicalResult CopyOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto source = symbolTable.lookupNearestSymbolFrom<TensorOp>(*this, getSourceAttr());
  auto target = symbolTable.lookupNearestSymbolFrom<TensorOp>(*this, getTargetAttr());
  if (!source || !target)
    return emitOpError("references ") << (source ? getTargetAttr() : getSourceAttr()) << ", which is not a plan.tensor";
  if (source.getType() != target.getType())
    return emitOpError("copies ") << source.getType() << " into " << target.getType();
  if (source.isOnHost() == target.isOnHost())
    return emitOpError("copies between host and device, but ")
           << getSourceAttr() << " and " << getTargetAttr() << " are both "
           << (source.isOnHost() ? "on the host" : "in device memory");
  return success();
}

LogicalResult RecordEventOp::verify() {
  if (getEvent() < 0)
    return emitOpError("event must be non-negative");
  return success();
}

LogicalResult WaitEventOp::verify() {
  if (getEvent() < 0)
    return emitOpError("event must be non-negative");
  return success();
}

#define GET_OP_CLASSES
#include "fsdpc/Dialect/Plan/IR/PlanOps.cpp.inc"
