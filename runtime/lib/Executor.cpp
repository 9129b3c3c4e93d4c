#include "fsdpc/runtime/Executor.h"

#include <cstdlib>
#include <cstring>
#include <thread>

namespace fsdpc::runtime {

namespace {
uint8_t *allocateRegion(uint64_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment.
  uint64_t rounded = (bytes + 63) / 64 * 64;
  auto *region = static_cast<uint8_t *>(std::aligned_alloc(64, rounded ? rounded : 64));
  if (region)
    std::memset(region, 0, rounded);
  return region;
}
} // namespace

Executor::~Executor() {
  std::free(persistent_);
  std::free(transient_);
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

StatusOr<std::unique_ptr<Executor>> Executor::create(PlanFile plan) {
  FSDPC_RETURN_IF_ERROR(validatePlan(plan));
  std::unique_ptr<Executor> executor(new Executor());
  executor->plan_ = std::move(plan);
  const plan::PlanHeader &h = executor->plan_.header;
  executor->persistent_ = allocateRegion(h.persistent_bytes());
  executor->transient_ = allocateRegion(h.transient_bytes());
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

  for (const plan::Instruction &inst : h.instructions()) {
    Resolved resolved{&inst, nullptr, {}};
    bool isEvent = inst.op() == "record_event" || inst.op() == "wait_event";
    if (!isEvent) {
      resolved.kernel = lookupKernel(inst.op());
      int numInputs, numOutputs;
      if (!resolved.kernel || !kernelArity(inst.op(), numInputs, numOutputs))
        return FSDPC_ERROR(kUnimplemented, "plan uses kernel '", inst.op(), "' that this fsdp-run does not have (at ",
                           inst.location(), ")");
      if ((numInputs >= 0 && numInputs != inst.inputs_size()) || (numOutputs >= 0 && numOutputs != inst.outputs_size()))
        return FSDPC_ERROR(kInvalidArgument, "plan instruction '", inst.op(), "' has ", inst.inputs_size(), " inputs and ",
                           inst.outputs_size(), " outputs (at ", inst.location(), ")");
    }
    resolved.call.instruction = &inst;
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
    Status status = r.kernel(r.call);
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

StatusOr<float> Executor::runStep(int64_t step) {
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
  return view(plan_.header.loss_tensor()).f32()[0];
}

NamedArrays Executor::parameters() const {
  NamedArrays arrays;
  for (int t = 0; t < plan_.header.tensors_size(); ++t) {
    const plan::Tensor &tensor = plan_.header.tensors(t);
    if (tensor.kind() != plan::PARAMETER && tensor.kind() != plan::FROZEN_PARAMETER)
      continue;
    TensorView v = view(t);
    arrays.emplace_back(tensor.name(),
                        HostArray::f32(std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end()), v.f32()));
  }
  return arrays;
}

} // namespace fsdpc::runtime
