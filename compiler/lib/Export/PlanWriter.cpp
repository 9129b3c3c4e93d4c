//===- PlanWriter.cpp - plan.program to plan.bin --------------------------===//
#include "fsdpc/Export/PlanWriter.h"

#include "fsdpc/Dialect/Plan/IR/Lifetimes.h"
#include "fsdpc/Dialect/Plan/IR/PlanOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

#include <cstring>

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::plan_ir;

namespace {

plan::TensorKind toProto(TensorKind kind) {
  switch (kind) {
  case TensorKind::parameter:
    return plan::PARAMETER;
  case TensorKind::frozen_parameter:
    return plan::FROZEN_PARAMETER;
  case TensorKind::optimizer_state:
    return plan::OPTIMIZER_STATE;
  case TensorKind::constant:
    return plan::CONSTANT;
  case TensorKind::input:
    return plan::INPUT;
  case TensorKind::step_counter:
    return plan::STEP_COUNTER;
  case TensorKind::transient:
    return plan::TRANSIENT;
  case TensorKind::gradient:
    return plan::GRADIENT;
  case TensorKind::view:
    return plan::VIEW;
  case TensorKind::buffer:
    return plan::BUFFER;
  case TensorKind::label_count:
    return plan::LABEL_COUNT;
  }
  return plan::KIND_UNSPECIFIED;
}

plan::DType toProto(Type element) {
  if (element.isF32())
    return plan::F32;
  if (element.isBF16())
    return plan::BF16;
  if (element.isF16())
    return plan::F16;
  if (element.isInteger(64))
    return plan::I64;
  if (element.isInteger(32))
    return plan::I32;
  if (element.isInteger(1))
    return plan::BOOL;
  return plan::DTYPE_UNSPECIFIED;
}

/// A constant's elements as the plan stores them (bool as one byte).
std::vector<uint8_t> constantBytes(DenseElementsAttr dense, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  Type element = dense.getElementType();
  auto store = [&](auto values, auto convert) {
    using Stored = decltype(convert(*values.begin()));
    int64_t i = 0;
    for (auto v : values) {
      Stored s = convert(v);
      std::memcpy(out.data() + i++ * sizeof(Stored), &s, sizeof(Stored));
    }
  };
  if (element.isF32())
    store(dense.getValues<float>(), [](float v) { return v; });
  else if (element.isInteger(64))
    store(dense.getValues<int64_t>(), [](int64_t v) { return v; });
  else if (element.isInteger(32))
    store(dense.getValues<int32_t>(), [](int32_t v) { return v; });
  else if (element.isInteger(1))
    store(dense.getValues<bool>(), [](bool v) { return static_cast<uint8_t>(v); });
  else // bf16, f16: their bit patterns
    store(dense.getValues<APFloat>(),
          [](const APFloat &v) { return static_cast<uint16_t>(v.bitcastToAPInt().getZExtValue()); });
  return out;
}

/// Kernel parameters: everything but the op's own structural attributes,
/// under the names and types the kernel contract gives them.
bool copyParams(Operation *op, ArrayRef<StringRef> structural, plan::Instruction &inst, std::string &error) {
  for (NamedAttribute attr : op->getAttrDictionary()) {
    StringRef name = attr.getName().getValue();
    if (llvm::is_contained(structural, name))
      continue;
    Attribute value = attr.getValue();
    if (auto b = dyn_cast<BoolAttr>(value))
      (*inst.mutable_int_attrs())[name.str()] = b.getValue();
    else if (auto i = dyn_cast<IntegerAttr>(value))
      (*inst.mutable_int_attrs())[name.str()] = i.getInt();
    else if (auto f = dyn_cast<FloatAttr>(value))
      (*inst.mutable_float_attrs())[name.str()] = f.getValueAsDouble();
    else if (auto list = dyn_cast<DenseI64ArrayAttr>(value)) {
      plan::IntList &out = (*inst.mutable_int_list_attrs())[name.str()];
      for (int64_t v : list.asArrayRef())
        out.add_values(v);
    } else if (auto s = dyn_cast<StringAttr>(value)) {
      (*inst.mutable_string_attrs())[name.str()] = s.str();
    } else if (auto reduction = dyn_cast<ReductionAttr>(value)) {
      // The plan file keeps the kernel contract's string form.
      (*inst.mutable_string_attrs())[name.str()] = stringifyReduction(reduction.getValue()).str();
    } else {
      error = "instruction '" + inst.op() + "' has a parameter '" + name.str() + "' of an unsupported kind";
      return false;
    }
  }
  return true;
}

} // namespace

std::string fsdpc::onnxNodeNames(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    std::string joined;
    for (Location part : fused.getLocations()) {
      std::string s = onnxNodeNames(part);
      if (!s.empty())
        joined += (joined.empty() ? "" : ",") + s;
    }
    return joined;
  }
  return "";
}

std::optional<runtime::PlanFile> fsdpc::buildPlanFile(ModuleOp module, const WeightStore &weights,
                                                      std::string &error, bool includeWeights) {
  auto programs = module.getOps<ProgramOp>();
  if (programs.empty()) {
    error = "the module holds no plan.program";
    return std::nullopt;
  }
  ProgramOp program = *programs.begin();
  if (!program.getPersistentBytes() || !program.getTransientBytes()) {
    error = "the plan.program is not allocated; run plan-allocate";
    return std::nullopt;
  }

  runtime::PlanFile file;
  plan::PlanHeader &h = file.header;
  h.set_producer("fsdpc");
  if (std::optional<StringRef> source = program.getSource())
    h.set_source_model(source->str());
  if (std::optional<int64_t> opset = program.getOpset())
    h.set_opset(*opset);
  h.set_world_size(program.getWorldSize());
  h.set_persistent_bytes(*program.getPersistentBytes());
  h.set_transient_bytes(*program.getTransientBytes());
  h.set_host_bytes(program.getHostBytes().value_or(0));
  h.set_global_batch(program.getGlobalBatch());
  if (std::optional<LossKind> lossKind = program.getLossKind())
    h.set_loss_kind(stringifyLossKind(*lossKind).str());
  h.set_optimizer(program.getOptimizer().str());
  h.set_num_classes(program.getNumClasses());

  llvm::StringMap<int> index;
  for (TensorOp tensor : program.getBlock().getOps<TensorOp>()) {
    index[tensor.getSymName()] = h.tensors_size();
    plan::Tensor *out = h.add_tensors();
    RankedTensorType type = tensor.getTensorType();
    out->set_name(tensor.getSourceName() ? tensor.getSourceName()->str() : tensor.getSymName().str());
    out->set_dtype(toProto(type.getElementType()));
    for (int64_t d : type.getShape())
      out->add_shape(d);
    out->set_kind(toProto(tensor.getKind()));
    out->set_region(tensor.isOnHost() ? plan::HOST : tensor.isPersistent() ? plan::PERSISTENT : plan::TRANSIENT_ARENA);
    out->set_offset(*tensor.getOffset());
    out->set_bytes(tensor.getByteSize());
    out->set_init_section(-1);
    if (tensor.getOptimizerSlot())
      out->set_optimizer_slot(tensor.getOptimizerSlot()->str());
    if (tensor.getOwner())
      out->set_owner(tensor.getOwner()->str());
    if (tensor.getUnit())
      out->set_unit(tensor.getUnit()->str());
    out->set_label(tensor.getLabel());

    // A unit's shard is cut from the unit's flat initial value at load time.
    // Buffers keep their initial values in weight-free plans too: a launch
    // that fills the parameters (--init normal) has nothing to fill them with.
    bool isShard = tensor.getUnit().has_value();
    if ((!isShard && includeWeights &&
         (tensor.getKind() == TensorKind::parameter || tensor.getKind() == TensorKind::frozen_parameter)) ||
        tensor.getKind() == TensorKind::buffer) {
      auto it = weights.values.find(out->name());
      if (it == weights.values.end() || it->second.size() * sizeof(float) != static_cast<size_t>(out->bytes())) {
        error = "no initial value of the right size for parameter '" + out->name() + "'";
        return std::nullopt;
      }
      out->set_init_section(file.addSection(it->second.data(), out->bytes()));
    } else if (tensor.getKind() == TensorKind::constant) {
      auto dense = dyn_cast<DenseElementsAttr>(*tensor.getValue());
      if (!dense) {
        error = "constant '" + tensor.getSymName().str() + "' is not a dense value";
        return std::nullopt;
      }
      std::vector<uint8_t> bytes = constantBytes(dense, out->bytes());
      out->set_init_section(file.addSection(bytes.data(), bytes.size()));
    }
  }

  // Units: where each parameter sits in its flat parameter, and the full
  // padded initial value every rank cuts its shard from.
  if (std::optional<Strategy> strategy = program.getStrategy())
    h.set_strategy(stringifyStrategy(*strategy).str());
  if (std::optional<int64_t> groupSize = program.getShardGroupSize())
    h.set_shard_group_size(*groupSize);
  for (UnitOp unit : program.getBlock().getOps<UnitOp>()) {
    plan::Unit *out = h.add_units();
    out->set_name(unit.getName().str());
    out->set_flat_size(unit.getFlatSize());
    out->set_padded_size(unit.getPaddedSize());
    out->set_shard_tensor(index.lookup(unit.getShard()));
    std::vector<float> flat(includeWeights ? unit.getPaddedSize() : 0, 0.0f);
    int64_t offset = 0;
    for (auto [name, type] : llvm::zip(unit.getParams(), unit.getParamTypes())) {
      plan::UnitParam *param = out->add_params();
      param->set_name(cast<StringAttr>(name).str());
      auto shape = cast<RankedTensorType>(cast<TypeAttr>(type).getValue()).getShape();
      for (int64_t d : shape)
        param->add_shape(d);
      param->set_offset(offset);
      int64_t count = cast<RankedTensorType>(cast<TypeAttr>(type).getValue()).getNumElements();
      if (!includeWeights) {
        offset += count;
        continue;
      }
      auto it = weights.values.find(param->name());
      if (it == weights.values.end() || static_cast<int64_t>(it->second.size()) != count) {
        error = "no initial value of the right size for parameter '" + param->name() + "'";
        return std::nullopt;
      }
      std::copy(it->second.begin(), it->second.end(), flat.begin() + offset);
      offset += count;
    }
    out->set_init_section(includeWeights ? file.addSection(flat.data(), flat.size() * sizeof(float)) : -1);
  }
  h.set_weights_omitted(!includeWeights);

  auto addRefs = [&](ArrayAttr refs, auto add) {
    for (Attribute ref : refs)
      add(index.lookup(cast<FlatSymbolRefAttr>(ref).getValue()));
  };
  int numEvents = 0;
  for (Operation &op : program.getBlock()) {
    if (isa<TensorOp, UnitOp>(op))
      continue;
    plan::Instruction *inst = h.add_instructions();
    inst->set_location(onnxNodeNames(op.getLoc()));
    if (auto kernel = dyn_cast<KernelOp>(op)) {
      inst->set_op(kernel.getKernel().str());
      inst->set_stream(plan::COMPUTE);
      addRefs(kernel.getInputs(), [&](int id) { inst->add_inputs(id); });
      addRefs(kernel.getOutputs(), [&](int id) { inst->add_outputs(id); });
      inst->set_on_host(kernel.getOnHost());
      if (!copyParams(&op, {"kernel", "inputs", "outputs", "stream", "on_host"}, *inst, error))
        return std::nullopt;
    } else if (auto copy = dyn_cast<CopyOp>(op)) {
      inst->set_op(copy.isToDevice() ? "copy_to_device" : "copy_to_host");
      inst->set_stream(copy.getStream() == Stream::compute ? plan::COMPUTE : plan::COMMUNICATION);
      inst->add_inputs(index.lookup(copy.getSource()));
      inst->add_outputs(index.lookup(copy.getTarget()));
    } else if (auto collective = dyn_cast<CollectiveOp>(op)) {
      inst->set_op(stringifyCollectiveKind(collective.getCollective()).str());
      inst->set_stream(collective.getStream() == Stream::compute ? plan::COMPUTE : plan::COMMUNICATION);
      addRefs(collective.getInputs(), [&](int id) { inst->add_inputs(id); });
      addRefs(collective.getOutputs(), [&](int id) { inst->add_outputs(id); });
      if (!copyParams(&op, {"collective", "inputs", "outputs", "stream"}, *inst, error))
        return std::nullopt;
    } else if (auto record = dyn_cast<RecordEventOp>(op)) {
      inst->set_op("record_event");
      inst->set_event(record.getEvent());
      inst->set_stream(record.getStream() == Stream::compute ? plan::COMPUTE : plan::COMMUNICATION);
      numEvents = std::max<int>(numEvents, record.getEvent() + 1);
    } else if (auto wait = dyn_cast<WaitEventOp>(op)) {
      inst->set_op("wait_event");
      inst->set_event(wait.getEvent());
      inst->set_stream(wait.getStream() == Stream::compute ? plan::COMPUTE : plan::COMMUNICATION);
      numEvents = std::max<int>(numEvents, wait.getEvent() + 1);
    } else {
      error = "unexpected op '" + op.getName().getStringRef().str() + "' in plan.program";
      return std::nullopt;
    }
  }
  h.set_num_events(numEvents);
  h.set_loss_tensor(program.getLoss() ? index.lookup(*program.getLoss()) : -1);
  if (std::optional<StringRef> norm = program.getGradNorm())
    h.set_grad_norm_tensor(index.lookup(*norm));
  // The verifier checked both are arrays of string tuples.
  auto field = [](Attribute tuple, unsigned i) { return cast<StringAttr>(cast<ArrayAttr>(tuple)[i]).str(); };
  for (Attribute rewrite :
       program.getInitializerRewrites() ? program.getInitializerRewrites()->getValue() : ArrayRef<Attribute>()) {
    plan::InitializerRewrite *out = h.add_initializer_rewrites();
    out->set_kind(field(rewrite, 0));
    out->set_name(field(rewrite, 1));
    out->set_source(field(rewrite, 2));
  }
  for (Attribute pair : program.getTorchNames() ? program.getTorchNames()->getValue() : ArrayRef<Attribute>()) {
    plan::TorchName *out = h.add_torch_names();
    out->set_parameter(field(pair, 0));
    out->set_torch_name(field(pair, 1));
  }
  if (std::optional<StringRef> output = program.getForwardOutput()) {
    h.set_forward_output_tensor(index.lookup(*output));
    h.set_forward_output_name(program.getForwardOutputName().value_or("output").str());
  }
  if (std::optional<StringRef> forwardLoss = program.getForwardLoss()) {
    const plan_ir::ForwardPrefix prefix = plan_ir::forwardPrefix(program);
    h.set_forward_instructions(prefix.loss);
    if (program.getForwardOutput())
      h.set_forward_output_instructions(prefix.output);
    h.set_forward_loss_tensor(index.lookup(*forwardLoss));
  }
  if (std::optional<ArrayAttr> outputs = program.getOutputs())
    for (Attribute output : *outputs)
      h.add_output_tensors(index.lookup(cast<FlatSymbolRefAttr>(output).getValue()));
  runtime::Status valid = runtime::validatePlan(file);
  if (!valid.isOk()) {
    error = "internal error: the plan is inconsistent: " + valid.message();
    return std::nullopt;
  }
  return file;
}
