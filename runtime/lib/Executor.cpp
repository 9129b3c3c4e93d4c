#include "fsdpc/runtime/Executor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <cstring>
#include <thread>

namespace fsdpc::runtime {

namespace {

uint64_t pageSize() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

/// A zeroed region whose pages become resident only when first touched, so
/// residency measures what the plan really uses.
uint8_t *mapRegion(uint64_t bytes, uint64_t &mapped) {
  mapped = std::max<uint64_t>((bytes + pageSize() - 1) / pageSize() * pageSize(), pageSize());
  void *region = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return region == MAP_FAILED ? nullptr : static_cast<uint8_t *>(region);
}

uint64_t residentBytes(uint8_t *region, uint64_t mapped) {
  if (!region)
    return 0;
  std::vector<unsigned char> pages(mapped / pageSize());
  if (mincore(region, mapped, pages.data()) != 0)
    return 0;
  uint64_t resident = 0;
  for (unsigned char page : pages)
    resident += (page & 1) ? pageSize() : 0;
  return resident;
}

} // namespace

Executor::~Executor() {
  if (persistent_)
    munmap(persistent_, persistentMapped_);
  if (transient_)
    munmap(transient_, transientMapped_);
}

uint64_t Executor::residentTensorBytes() const {
  return residentBytes(persistent_, persistentMapped_) + residentBytes(transient_, transientMapped_);
}

int Executor::shardIndex() const {
  int groupSize = std::max(plan_.header.shard_group_size(), 1);
  return communicator_ ? communicator_->rank() % groupSize : 0;
}

TensorView Executor::view(int tensorIndex) const {
  const plan::Tensor &tensor = plan_.header.tensors(tensorIndex);
  TensorView v;
  uint8_t *base = tensor.region() == plan::PERSISTENT ? persistent_ : transient_;
  v.data = base + tensor.offset();
  v.dtype = tensor.dtype();
  v.shape.assign(tensor.shape().begin(), tensor.shape().end());
  return v;
}

StatusOr<std::unique_ptr<Executor>> Executor::create(PlanFile plan, Communicator *communicator) {
  FSDPC_RETURN_IF_ERROR(validatePlan(plan));
  std::unique_ptr<Executor> executor(new Executor());
  executor->plan_ = std::move(plan);
  executor->communicator_ = communicator;
  executor->context_.rank = communicator ? communicator->rank() : 0;
  const plan::PlanHeader &h = executor->plan_.header;
  if (communicator && static_cast<int>(h.world_size()) != communicator->worldSize())
    return FSDPC_ERROR(kInvalidArgument, "the plan was compiled for world size ", h.world_size(), " but this launch has ",
                       communicator->worldSize(), " rank(s)");
  executor->persistent_ = mapRegion(h.persistent_bytes(), executor->persistentMapped_);
  executor->transient_ = mapRegion(h.transient_bytes(), executor->transientMapped_);
  if (!executor->persistent_ || !executor->transient_)
    return FSDPC_ERROR(kInvalidArgument, "cannot allocate ", h.persistent_bytes() + h.transient_bytes(),
                       " bytes of tensor memory");

  for (int t = 0; t < h.tensors_size(); ++t) {
    const plan::Tensor &tensor = h.tensors(t);
    if (tensor.init_section() >= 0)
      std::memcpy(executor->view(t).data, executor->plan_.sectionData(tensor.init_section()), tensor.bytes());
    if (tensor.kind() == plan::INPUT)
      executor->inputTensors_.push_back(t);
    if (tensor.kind() == plan::STEP_COUNTER)
      executor->stepTensor_ = t;
  }
  // Each rank's shard of each unit, cut from the unit's full initial value.
  for (const plan::Unit &unit : h.units()) {
    TensorView shard = executor->view(unit.shard_tensor());
    uint64_t shardBytes = shard.numElements() * sizeof(float);
    std::memcpy(shard.data, executor->plan_.sectionData(unit.init_section()) + executor->shardIndex() * shardBytes,
                shardBytes);
  }

  for (const plan::Instruction &inst : h.instructions()) {
    Resolved resolved{&inst, nullptr, {}};
    resolved.call.instruction = &inst;
    bool isEvent = inst.op() == "record_event" || inst.op() == "wait_event";
    resolved.collective = inst.op() == "all_gather" || inst.op() == "reduce_scatter" || inst.op() == "all_reduce";
    if (resolved.collective) {
      if (!communicator)
        return FSDPC_ERROR(kInvalidArgument, "plan has collective '", inst.op(), "' but no communicator was given");
      if (inst.inputs_size() != 1 || inst.outputs_size() != 1)
        return FSDPC_ERROR(kInvalidArgument, "collective '", inst.op(), "' needs one input and one output");
      Group &group = resolved.group;
      group.size = static_cast<int>(resolved.call.intAttr("group_size", 1));
      group.stride = static_cast<int>(resolved.call.intAttr("group_stride", 1));
      std::string reduction = resolved.call.stringAttr("reduction", "sum");
      if (inst.op() != "all_gather" && reduction != "sum" && reduction != "avg")
        return FSDPC_ERROR(kInvalidArgument, "collective '", inst.op(), "' has reduction '", reduction,
                           "'; it must be 'sum' or 'avg'");
      resolved.reduction = reduction == "avg" ? Reduction::kAvg : Reduction::kSum;
      FSDPC_RETURN_IF_ERROR(checkGroup(group, communicator->worldSize()));
      const plan::Tensor &in = h.tensors(inst.inputs(0)), &out = h.tensors(inst.outputs(0));
      int64_t inCount = numElements(in), outCount = numElements(out);
      bool sizesFit = inst.op() == "all_gather"       ? outCount == inCount * group.size
                      : inst.op() == "reduce_scatter" ? inCount == outCount * group.size
                                                      : inCount == outCount;
      if (!sizesFit || in.dtype() != plan::F32 || out.dtype() != plan::F32)
        return FSDPC_ERROR(kInvalidArgument, "collective '", inst.op(), "' has tensors of sizes ", inCount, " and ",
                           outCount, " for a group of ", group.size);
    } else if (!isEvent) {
      // validatePlan checked the instruction against the kernel contract.
      resolved.kernel = lookupKernel(inst.op());
      if (!resolved.kernel)
        return FSDPC_ERROR(kUnimplemented, "the CPU backend has no kernel '", inst.op(), "' (at ", inst.location(),
                           ")");
    }
    resolved.call.context = &executor->context_;
    for (int id : inst.inputs())
      resolved.call.inputs.push_back(executor->view(id));
    for (int id : inst.outputs())
      resolved.call.outputs.push_back(executor->view(id));
    (inst.stream() == plan::COMMUNICATION ? executor->commStream_ : executor->computeStream_).push_back(resolved);
  }
  executor->eventRecordedAtStep_.assign(h.num_events(), 0);
  return executor;
}

void Executor::recordEvent(int event, int64_t step) {
  {
    std::lock_guard<std::mutex> lock(eventMutex_);
    eventRecordedAtStep_[event] = step;
  }
  eventSignal_.notify_all();
}

void Executor::waitEvent(int event, int64_t step) {
  std::unique_lock<std::mutex> lock(eventMutex_);
  eventSignal_.wait(lock, [&] { return eventRecordedAtStep_[event] >= step || streamFailed_; });
}

Status Executor::runStream(std::vector<Resolved> &stream, int64_t step) {
  for (Resolved &r : stream) {
    const plan::Instruction &inst = *r.instruction;
    if (inst.op() == "record_event") {
      recordEvent(inst.event(), step);
      continue;
    }
    if (inst.op() == "wait_event") {
      waitEvent(inst.event(), step);
      if (streamFailed_)
        return FSDPC_ERROR(kInternal, "the other stream failed");
      continue;
    }
    auto start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status status = r.collective ? runCollective(r) : r.kernel(r.call);
    if (profile_)
      r.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!status.isOk()) {
      {
        std::lock_guard<std::mutex> lock(eventMutex_);
        streamFailed_ = true;
      }
      eventSignal_.notify_all();
      if (!inst.location().empty())
        return Status::error(status.code(), status.message() + " (at ONNX node " + inst.location() + ")",
                             status.file(), status.line());
      return status;
    }
  }
  return Status::ok();
}

Status Executor::runCollective(const Resolved &r) {
  const std::string &op = r.instruction->op();
  const TensorView &in = r.call.inputs[0], &out = r.call.outputs[0];
  if (op == "all_gather")
    return communicator_->allGather(in.f32(), out.f32(), in.numElements(), r.group);
  if (op == "reduce_scatter")
    return communicator_->reduceScatter(in.f32(), out.f32(), out.numElements(), r.reduction, r.group);
  if (in.data != out.data)
    std::memcpy(out.data, in.data, in.numElements() * sizeof(float));
  return communicator_->allReduce(out.f32(), out.numElements(), r.reduction, r.group);
}

StatusOr<float> Executor::runStep(int64_t step) {
  context_.step = step;
  if (stepTensor_ >= 0)
    view(stepTensor_).i64()[0] = step;
  Status commStatus;
  std::thread commThread;
  if (!commStream_.empty())
    commThread = std::thread([&] { commStatus = runStream(commStream_, step); });
  Status computeStatus = runStream(computeStream_, step);
  if (commThread.joinable())
    commThread.join();
  FSDPC_RETURN_IF_ERROR(computeStatus);
  FSDPC_RETURN_IF_ERROR(commStatus);
  return plan_.header.loss_tensor() >= 0 ? view(plan_.header.loss_tensor()).f32()[0] : 0.0f;
}

namespace {
std::vector<int64_t> shapeOf(const google::protobuf::RepeatedField<int64_t> &shape) {
  return std::vector<int64_t>(shape.begin(), shape.end());
}
/// A frozen parameter, or a trainable one outside every unit: held whole.
bool isWholeParameter(const plan::Tensor &tensor) {
  return (tensor.kind() == plan::PARAMETER && tensor.unit().empty()) || tensor.kind() == plan::FROZEN_PARAMETER;
}
/// What a sharded checkpoint holds of a rank: its persistent tensors but
/// constants (which the plan has) and views (which own no bytes).
bool isLocalState(const plan::Tensor &tensor) {
  return tensor.region() == plan::PERSISTENT && tensor.kind() != plan::VIEW && tensor.kind() != plan::CONSTANT;
}
} // namespace

StatusOr<NamedArrays> Executor::gatherFullParameters() {
  const plan::PlanHeader &h = plan_.header;
  const int rank = communicator_ ? communicator_->rank() : 0;
  const Group shardGroup{std::max(h.shard_group_size(), 1), 1};
  // World rank 0 is the first member of the first shard group; the other
  // groups hold copies of the same shards and need not take part.
  const bool inFirstGroup = rank < shardGroup.size;
  NamedArrays arrays;
  for (int t = 0; t < h.tensors_size(); ++t) {
    const plan::Tensor &tensor = h.tensors(t);
    if (isWholeParameter(tensor)) {
      if (rank == 0)
        arrays.emplace_back(tensor.name(), HostArray::f32(shapeOf(tensor.shape()), view(t).f32()));
    }
  }
  for (const plan::Unit &unit : h.units()) {
    if (!inFirstGroup)
      continue;
    TensorView shard = view(unit.shard_tensor());
    std::vector<float> full(rank == 0 ? unit.padded_size() : 0);
    if (shardGroup.size == 1)
      std::memcpy(full.data(), shard.data, shard.numElements() * sizeof(float));
    else if (!communicator_)
      return FSDPC_ERROR(kInvalidArgument, "gathering sharded parameters needs a communicator");
    else
      FSDPC_RETURN_IF_ERROR(
          communicator_->gatherToFirst(shard.f32(), rank == 0 ? full.data() : nullptr, shard.numElements(), shardGroup));
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
    if (isWholeParameter(tensor)) {
      StatusOr<const HostArray *> array = find(tensor.name(), shapeOf(tensor.shape()));
      if (!array.isOk())
        return array.status();
      std::memcpy(view(t).data, (*array)->bytes.data(), tensor.bytes());
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
    TensorView shard = view(unit.shard_tensor());
    std::memcpy(shard.data, full.data() + shardIndex() * shard.numElements(), shard.numElements() * sizeof(float));
  }
  return Status::ok();
}

std::vector<std::pair<std::string, double>> Executor::profile() const {
  std::map<std::string, double> byOp;
  for (const std::vector<Resolved> *stream : {&computeStream_, &commStream_})
    for (const Resolved &r : *stream)
      if (r.seconds > 0)
        byOp[r.instruction->op() + (r.instruction->stream() == plan::COMMUNICATION ? " (comm)" : "")] += r.seconds;
  std::vector<std::pair<std::string, double>> sorted(byOp.begin(), byOp.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
  return sorted;
}

NamedArrays Executor::localState() const {
  NamedArrays arrays;
  for (int t = 0; t < plan_.header.tensors_size(); ++t) {
    const plan::Tensor &tensor = plan_.header.tensors(t);
    if (!isLocalState(tensor))
      continue;
    TensorView v = view(t);
    arrays.emplace_back(tensor.name(), tensor.dtype() == plan::I64 ? HostArray::i64(shapeOf(tensor.shape()), v.i64())
                                                                   : HostArray::f32(shapeOf(tensor.shape()), v.f32()));
  }
  return arrays;
}

Status Executor::loadLocalState(const NamedArrays &arrays) {
  NamedArrays expected = localState();
  if (expected.size() != arrays.size())
    return FSDPC_ERROR(kInvalidArgument, "the checkpoint holds ", arrays.size(), " tensors but this plan has ",
                       expected.size());
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
    std::memcpy(view(t).data, found->bytes.data(), tensor.bytes());
  }
  return Status::ok();
}

} // namespace fsdpc::runtime
