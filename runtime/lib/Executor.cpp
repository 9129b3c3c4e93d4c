#include "fsdpc/runtime/Executor.h"

#include "fsdpc/runtime/Random.h"

#include <algorithm>
#include <cstring>

namespace fsdpc::runtime {

namespace {

/// The alignment the compiler assumes for both regions' bases.
constexpr uint64_t kRegionAlignment = 64;

std::vector<int64_t> shapeOf(const google::protobuf::RepeatedField<int64_t> &shape) {
  return std::vector<int64_t>(shape.begin(), shape.end());
}
/// A frozen parameter, or a trainable one outside every unit: held whole.
bool isWholeParameter(const plan::Tensor &tensor) {
  return (tensor.kind() == plan::PARAMETER && tensor.unit().empty()) || tensor.kind() == plan::FROZEN_PARAMETER;
}
/// A module buffer (BatchNorm running statistics): in the state dict, but
/// never drawn by --init normal, whose plan values stand.
bool isBuffer(const plan::Tensor &tensor) { return tensor.kind() == plan::BUFFER; }
/// What a sharded checkpoint holds of a rank: its persistent tensors but
/// constants (which the plan has) and views (which own no bytes).
bool isLocalState(const plan::Tensor &tensor) { return isCheckpointedState(tensor); }

} // namespace

NamedArrays normalInitialParameters(const plan::PlanHeader &h, double std, uint64_t seed) {
  NamedArrays arrays;
  auto draw = [&](const std::string &name, std::vector<int64_t> shape) {
    NormalStream normal(splitMix64(seed ^ fnv1a64(name.data(), name.size())));
    HostArray array = HostArray::f32(std::move(shape), nullptr);
    for (int64_t i = 0; i < array.numElements(); ++i)
      array.data<float>()[i] = static_cast<float>(std * normal.next());
    arrays.emplace_back(name, std::move(array));
  };
  for (const plan::Tensor &tensor : h.tensors())
    if (isWholeParameter(tensor))
      draw(tensor.name(), shapeOf(tensor.shape()));
  for (const plan::Unit &unit : h.units())
    for (const plan::UnitParam &param : unit.params())
      draw(param.name(), shapeOf(param.shape()));
  return arrays;
}

int Executor::shardIndex() const {
  int groupSize = std::max(plan_.header.shard_group_size(), 1);
  return control_ ? control_->rank() % groupSize : 0;
}

TensorView Executor::deviceView(int tensorIndex) const {
  const plan::Tensor &tensor = plan_.header.tensors(tensorIndex);
  TensorView v;
  v.data = device_->address(tensor.region(), tensor.offset());
  v.dtype = tensor.dtype();
  v.shape.assign(tensor.shape().begin(), tensor.shape().end());
  return v;
}

Status Executor::uploadTensor(int tensorIndex, const void *host, uint64_t bytes) {
  const plan::Tensor &tensor = plan_.header.tensors(tensorIndex);
  if (bytes != tensor.bytes())
    return FSDPC_ERROR(kInvalidArgument, "tensor '", tensor.name(), "' holds ", tensor.bytes(), " bytes, not ", bytes);
  return device_->upload(deviceView(tensorIndex).data, host, bytes);
}

StatusOr<HostArray> Executor::downloadTensor(int tensorIndex) const {
  const plan::Tensor &tensor = plan_.header.tensors(tensorIndex);
  HostArray array;
  array.dtype = tensor.dtype();
  array.shape = shapeOf(tensor.shape());
  array.bytes.resize(tensor.bytes());
  FSDPC_RETURN_IF_ERROR(device_->download(array.bytes.data(), deviceView(tensorIndex).data, tensor.bytes()));
  return array;
}

StatusOr<ResolvedInstruction> Executor::resolve(const plan::Instruction &inst) const {
  const plan::PlanHeader &h = plan_.header;
  ResolvedInstruction r;
  r.instruction = &inst;
  r.stream = inst.stream();
  r.call.instruction = &inst;
  for (int id : inst.inputs())
    r.call.inputs.push_back(deviceView(id));
  for (int id : inst.outputs())
    r.call.outputs.push_back(deviceView(id));
  if (inst.op() == "record_event" || inst.op() == "wait_event") {
    r.kind = inst.op() == "record_event" ? ResolvedInstruction::Kind::kRecordEvent
                                         : ResolvedInstruction::Kind::kWaitEvent;
    r.event = inst.event();
    return r;
  }
  if (isHostCopy(inst.op())) { // validatePlan checked its two sides
    r.kind = inst.op() == "copy_to_device" ? ResolvedInstruction::Kind::kCopyToDevice
                                           : ResolvedInstruction::Kind::kCopyToHost;
    return r;
  }
  if (isCollective(inst.op())) {
    r.kind = ResolvedInstruction::Kind::kCollective;
    r.collective = inst.op() == "all_gather"       ? Collective::kAllGather
                   : inst.op() == "reduce_scatter" ? Collective::kReduceScatter
                                                   : Collective::kAllReduce;
    if (inst.inputs_size() != 1 || inst.outputs_size() != 1)
      return FSDPC_ERROR(kInvalidArgument, "collective '", inst.op(), "' needs one input and one output");
    auto intAttr = [&](const char *name, int64_t fallback) {
      auto it = inst.int_attrs().find(name);
      return it == inst.int_attrs().end() ? fallback : it->second;
    };
    r.group.size = static_cast<int>(intAttr("group_size", 1));
    r.group.stride = static_cast<int>(intAttr("group_stride", 1));
    auto reductionAttr = inst.string_attrs().find("reduction");
    std::string reduction = reductionAttr == inst.string_attrs().end() ? "sum" : reductionAttr->second;
    if (r.collective != Collective::kAllGather && reduction != "sum" && reduction != "avg")
      return FSDPC_ERROR(kInvalidArgument, "collective '", inst.op(), "' has reduction '", reduction,
                         "'; it must be 'sum' or 'avg'");
    r.reduction = reduction == "avg" ? Reduction::kAvg : Reduction::kSum;
    FSDPC_RETURN_IF_ERROR(checkGroup(r.group, control_ ? control_->worldSize() : 1));
    const plan::Tensor &in = h.tensors(inst.inputs(0)), &out = h.tensors(inst.outputs(0));
    int64_t inCount = numElements(in), outCount = numElements(out);
    bool sizesFit = r.collective == Collective::kAllGather       ? outCount == inCount * r.group.size
                    : r.collective == Collective::kReduceScatter ? inCount == outCount * r.group.size
                                                                 : inCount == outCount;
    if (!sizesFit || in.dtype() != out.dtype())
      return FSDPC_ERROR(kInvalidArgument, "collective '", inst.op(), "' has tensors of sizes ", inCount, " and ",
                         outCount, " for a group of ", r.group.size);
    r.dtype = in.dtype();
    return r;
  }
  // validatePlan checked the instruction against the kernel contract; its
  // parameters are decoded once, here.
  r.kind = ResolvedInstruction::Kind::kKernel;
  r.params = std::make_shared<const DecodedParams>(decodeParams(inst));
  r.call.params = r.params.get();
  r.onHost = inst.on_host();
  r.kernel = r.onHost ? device_->hostKernel(inst.op()) : device_->kernel(inst.op());
  if (!r.kernel)
    return FSDPC_ERROR(kUnimplemented, "the ", r.onHost ? std::string("host") : device_->name(),
                       " device has no kernel '", inst.op(), "' (at ", inst.location(), ")");
  return r;
}

StatusOr<std::unique_ptr<Executor>> Executor::create(PlanFile plan, std::unique_ptr<Device> device,
                                                     HostControl *control, CollectiveChannel *channel) {
  FSDPC_RETURN_IF_ERROR(validatePlan(plan));
  std::unique_ptr<Executor> executor(new Executor());
  executor->plan_ = std::move(plan);
  executor->device_ = std::move(device);
  executor->control_ = control;
  const plan::PlanHeader &h = executor->plan_.header;
  const int worldSize = control ? control->worldSize() : 1;
  if (static_cast<int>(h.world_size()) != worldSize)
    return FSDPC_ERROR(kInvalidArgument, "the plan was compiled for world size ", h.world_size(), " but this launch has ",
                       worldSize, " rank(s)");
  Device &dev = *executor->device_;
  FSDPC_RETURN_IF_ERROR(
      dev.allocateRegions(h.persistent_bytes(), h.transient_bytes(), h.host_bytes(), kRegionAlignment));

  for (int t = 0; t < h.tensors_size(); ++t) {
    const plan::Tensor &tensor = h.tensors(t);
    if (tensor.init_section() >= 0)
      FSDPC_RETURN_IF_ERROR(
          executor->uploadTensor(t, executor->plan_.sectionData(tensor.init_section()), tensor.bytes()));
    if (tensor.kind() == plan::INPUT)
      executor->inputTensors_.push_back(t);
    if (tensor.kind() == plan::STEP_COUNTER)
      executor->stepTensor_ = t;
    if (tensor.kind() == plan::LABEL_COUNT) {
      int labels = -1;
      for (int u = 0; u < h.tensors_size(); ++u)
        if (h.tensors(u).kind() == plan::INPUT && h.tensors(u).label() && h.tensors(u).name() == tensor.owner())
          labels = u;
      if (labels < 0 || tensor.dtype() != plan::I64 || tensor.shape_size() != 0 ||
          h.tensors(labels).dtype() != plan::I64)
        return FSDPC_ERROR(kInvalidArgument, "label count '", tensor.name(), "' must be an int64 scalar counting the ",
                           "int64 labels input '", tensor.owner(), "'");
      executor->labelCounts_.emplace_back(t, labels);
    }
  }
  // Each rank's shard of each unit, cut from the unit's full initial value.
  for (const plan::Unit &unit : h.units()) {
    const plan::Tensor &shard = h.tensors(unit.shard_tensor());
    if (unit.init_section() < 0) // a --no-weights plan: the launch provides them
      continue;
    FSDPC_RETURN_IF_ERROR(executor->uploadTensor(
        unit.shard_tensor(), executor->plan_.sectionData(unit.init_section()) + executor->shardIndex() * shard.bytes(),
        shard.bytes()));
  }

  std::vector<ResolvedInstruction> step;
  for (const plan::Instruction &inst : h.instructions()) {
    StatusOr<ResolvedInstruction> resolved = executor->resolve(inst);
    if (!resolved.isOk())
      return resolved.status();
    step.push_back(std::move(*resolved));
  }
  FSDPC_RETURN_IF_ERROR(dev.prepare(std::move(step), h.num_events(), channel));
  return executor;
}

StatusOr<float> Executor::runStep(int64_t step) {
  StepContext context;
  context.step = step;
  context.rank = control_ ? control_->rank() : 0;
  if (stepTensor_ >= 0)
    FSDPC_RETURN_IF_ERROR(uploadTensor(stepTensor_, &step, sizeof(step)));
  FSDPC_RETURN_IF_ERROR(device_->runStep(context));
  float loss = 0.0f;
  if (plan_.header.loss_tensor() >= 0)
    FSDPC_RETURN_IF_ERROR(device_->download(&loss, deviceView(plan_.header.loss_tensor()).data, sizeof(loss)));
  return loss;
}

StatusOr<float> Executor::runForwardPass(int64_t step) {
  const plan::PlanHeader &h = plan_.header;
  if (!h.has_forward_instructions())
    return FSDPC_ERROR(kInvalidArgument, "the plan marks no forward pass (a forward-only plan, or one compiled ",
                       "before evaluation was supported): recompile it with fsdpc");
  FSDPC_RETURN_IF_ERROR(runForwardPrefix(step, h.forward_instructions()));
  float loss = 0.0f;
  FSDPC_RETURN_IF_ERROR(device_->download(&loss, deviceView(h.forward_loss_tensor()).data, sizeof(loss)));
  return loss;
}

Status Executor::runForwardToOutput(int64_t step) {
  const plan::PlanHeader &h = plan_.header;
  if (!h.has_forward_instructions() || !h.has_forward_output_tensor())
    return FSDPC_ERROR(kInvalidArgument, "the plan marks no forward output (a forward-only plan, or one compiled ",
                       "before evaluation was supported): recompile it with fsdpc");
  return runForwardPrefix(step, h.has_forward_output_instructions() ? h.forward_output_instructions()
                                                                    : h.forward_instructions());
}

Status Executor::runForwardPrefix(int64_t step, int64_t instructions) {
  StepContext context;
  context.step = step;
  context.rank = control_ ? control_->rank() : 0;
  return device_->runPrefix(context, instructions);
}

StatusOr<float> Executor::lastGradNorm() {
  float norm = 0.0f;
  if (!plan_.header.has_grad_norm_tensor())
    return FSDPC_ERROR(kInvalidArgument, "the plan does not clip gradients (fsdpc --clip-grad-norm)");
  FSDPC_RETURN_IF_ERROR(device_->download(&norm, deviceView(plan_.header.grad_norm_tensor()).data, sizeof(norm)));
  return norm;
}

StatusOr<NamedArrays> Executor::gatherFullParameters() {
  const plan::PlanHeader &h = plan_.header;
  const int rank = control_ ? control_->rank() : 0;
  const Group shardGroup{std::max(h.shard_group_size(), 1), 1};
  // World rank 0 is the first member of the first shard group; the other
  // groups hold copies of the same shards and need not take part.
  const bool inFirstGroup = rank < shardGroup.size;
  NamedArrays arrays;
  for (int t = 0; t < h.tensors_size(); ++t) {
    // Buffers differ by rank (each normalises its own batch); the state
    // dict has rank 0's, as torch FSDP's full state dict does.
    if ((isWholeParameter(h.tensors(t)) || isBuffer(h.tensors(t))) && rank == 0) {
      StatusOr<HostArray> array = downloadTensor(t);
      if (!array.isOk())
        return array.status();
      arrays.emplace_back(h.tensors(t).name(), std::move(*array));
    }
  }
  for (const plan::Unit &unit : h.units()) {
    if (!inFirstGroup)
      continue;
    StatusOr<HostArray> shard = downloadTensor(unit.shard_tensor());
    if (!shard.isOk())
      return shard.status();
    std::vector<float> full(rank == 0 ? unit.padded_size() : 0);
    if (shardGroup.size == 1)
      std::memcpy(full.data(), shard->bytes.data(), shard->bytes.size());
    else if (!control_)
      return FSDPC_ERROR(kInvalidArgument, "gathering sharded parameters needs the other ranks");
    else
      FSDPC_RETURN_IF_ERROR(control_->gatherBytesToFirst(shard->bytes.data(), rank == 0 ? full.data() : nullptr,
                                                         shard->bytes.size(), shardGroup));
    if (rank != 0)
      continue;
    for (const plan::UnitParam &param : unit.params())
      arrays.emplace_back(param.name(), HostArray::f32(shapeOf(param.shape()), full.data() + param.offset()));
  }
  return arrays;
}

Status Executor::loadFullParameters(const NamedArrays &arrays) {
  const plan::PlanHeader &h = plan_.header;
  auto find = [&](const std::string &name, const std::vector<int64_t> &shape) -> StatusOr<const HostArray *> {
    for (const auto &[arrayName, array] : arrays)
      if (arrayName == name) {
        if (array.shape != shape || array.dtype != plan::F32)
          return FSDPC_ERROR(kInvalidArgument, "parameter '", name, "' has another shape or dtype than the model's");
        return &array;
      }
    return FSDPC_ERROR(kNotFound, "parameter '", name, "' is missing");
  };
  for (int t = 0; t < h.tensors_size(); ++t) {
    const plan::Tensor &tensor = h.tensors(t);
    // A buffer is loaded where the file has it (a torch state dict does);
    // where not, its value from the plan stands.
    auto inFile = [&] {
      return std::any_of(arrays.begin(), arrays.end(), [&](const auto &a) { return a.first == tensor.name(); });
    };
    if (isWholeParameter(tensor) || (isBuffer(tensor) && inFile())) {
      StatusOr<const HostArray *> array = find(tensor.name(), shapeOf(tensor.shape()));
      if (!array.isOk())
        return array.status();
      FSDPC_RETURN_IF_ERROR(uploadTensor(t, (*array)->bytes.data(), tensor.bytes()));
    }
  }
  for (const plan::Unit &unit : h.units()) {
    std::vector<float> full(unit.padded_size(), 0.0f);
    for (const plan::UnitParam &param : unit.params()) {
      StatusOr<const HostArray *> array = find(param.name(), shapeOf(param.shape()));
      if (!array.isOk())
        return array.status();
      std::memcpy(full.data() + param.offset(), (*array)->bytes.data(), (*array)->bytes.size());
    }
    const plan::Tensor &shard = h.tensors(unit.shard_tensor());
    int64_t shardElements = numElements(shard);
    FSDPC_RETURN_IF_ERROR(
        uploadTensor(unit.shard_tensor(), full.data() + shardIndex() * shardElements, shard.bytes()));
  }
  return Status::ok();
}

StatusOr<NamedArrays> Executor::localState() const {
  NamedArrays arrays;
  for (int t = 0; t < plan_.header.tensors_size(); ++t) {
    const plan::Tensor &tensor = plan_.header.tensors(t);
    if (!isLocalState(tensor))
      continue;
    StatusOr<HostArray> array = downloadTensor(t);
    if (!array.isOk())
      return array.status();
    arrays.emplace_back(tensor.name(), std::move(*array));
  }
  return arrays;
}

Status Executor::loadLocalState(const NamedArrays &arrays) {
  int expected = 0;
  for (const plan::Tensor &tensor : plan_.header.tensors())
    expected += isLocalState(tensor);
  if (expected != static_cast<int>(arrays.size()))
    return FSDPC_ERROR(kInvalidArgument, "the checkpoint holds ", arrays.size(), " tensors but this plan has ",
                       expected);
  for (int t = 0; t < plan_.header.tensors_size(); ++t) {
    const plan::Tensor &tensor = plan_.header.tensors(t);
    if (!isLocalState(tensor))
      continue;
    const HostArray *found = nullptr;
    for (const auto &[name, array] : arrays)
      if (name == tensor.name())
        found = &array;
    if (!found)
      return FSDPC_ERROR(kNotFound, "the checkpoint has no tensor '", tensor.name(), "'");
    if (found->shape != shapeOf(tensor.shape()) || found->dtype != tensor.dtype())
      return FSDPC_ERROR(kInvalidArgument, "checkpoint tensor '", tensor.name(), "' has another shape or dtype");
    FSDPC_RETURN_IF_ERROR(uploadTensor(t, found->bytes.data(), tensor.bytes()));
  }
  return Status::ok();
}

} // namespace fsdpc::runtime
