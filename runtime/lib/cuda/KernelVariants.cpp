//===- KernelVariants.cpp - interchangeable launches, chosen by timing ----===//
#include "KernelVariants.h"

#include "CudaCheck.h"
#include "fsdpc/runtime/HostArray.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>

namespace fsdpc::runtime::cuda {

namespace {

/// The choices made in this process, by shape: every instruction of a
/// shape (GPT-2's twelve attention layers) runs the same variant.
struct ChosenVariants {
  std::mutex mutex;
  std::map<std::string, int> byShape;
};

ChosenVariants &chosenVariants() {
  static ChosenVariants chosen;
  return chosen;
}

/// Runs of each variant timed together: one run of a short kernel is noisy.
constexpr int kTimedRuns = 2;

/// Milliseconds of a run of each variant (the mean of kTimedRuns), timed on
/// the call's stream; fails if the events cannot be made or a launch fails.
Status timeVariants(cudaStream_t stream, const std::vector<KernelVariant> &variants, std::vector<float> &ms) {
  std::vector<cudaEvent_t> events(2 * variants.size(), nullptr);
  Status status = Status::ok();
  for (cudaEvent_t &event : events)
    if (status.isOk())
      status = cudaStatus(cudaEventCreate(&event), "cudaEventCreate");
  for (size_t v = 0; status.isOk() && v < variants.size(); ++v) {
    status = variants[v].launch(); // loads the kernels: not timed
    if (status.isOk())
      status = cudaStatus(cudaEventRecord(events[2 * v], stream), "cudaEventRecord");
    for (int run = 0; status.isOk() && run < kTimedRuns; ++run)
      status = variants[v].launch();
    if (status.isOk())
      status = cudaStatus(cudaEventRecord(events[2 * v + 1], stream), "cudaEventRecord");
  }
  if (status.isOk())
    status = cudaStatus(cudaEventSynchronize(events.back()), "cudaEventSynchronize");
  ms.assign(variants.size(), 0.0f);
  for (size_t v = 0; status.isOk() && v < variants.size(); ++v) {
    status = cudaStatus(cudaEventElapsedTime(&ms[v], events[2 * v], events[2 * v + 1]), "cudaEventElapsedTime");
    ms[v] /= kTimedRuns;
  }
  for (cudaEvent_t event : events)
    if (event)
      cudaEventDestroy(event);
  return status;
}

/// Whether an output of the call shares a byte with one of its inputs.
bool writesOverInputs(const KernelCall &call) {
  auto bytesOf = [](const TensorView &v) {
    const auto *begin = static_cast<const char *>(v.data);
    return std::make_pair(begin, begin + v.numElements() * dtypeSize(v.dtype));
  };
  for (const TensorView &out : call.outputs)
    for (const TensorView &in : call.inputs) {
      const auto [outBegin, outEnd] = bytesOf(out);
      const auto [inBegin, inEnd] = bytesOf(in);
      if (outBegin < inEnd && inBegin < outEnd)
        return true;
    }
  return false;
}

} // namespace

std::string dtypeName(plan::DType dtype) {
  std::string name = plan::DType_Name(dtype);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name;
}

Status runFastestVariant(const KernelCall &call, const std::string &shape, const std::vector<KernelVariant> &variants) {
  CudaLaunch &launch = launchOf(call);
  if (variants.size() == 1)
    return variants[0].launch();
  if (auto *choice = static_cast<VariantChoice *>(launch.cache.get())) {
    if (choice->index < 0 || choice->index >= static_cast<int>(variants.size()))
      return FSDPC_ERROR(kInternal, call.instruction->op(), ": no kernel variant ", choice->index, " (of ",
                         variants.size(), ")");
    return variants[choice->index].launch();
  }
  if (writesOverInputs(call)) {
    launch.cache = std::make_shared<VariantChoice>(VariantChoice{0});
    return variants[0].launch();
  }
  ChosenVariants &chosen = chosenVariants();
  {
    std::lock_guard<std::mutex> lock(chosen.mutex);
    auto it = chosen.byShape.find(shape);
    if (it != chosen.byShape.end()) {
      launch.cache = std::make_shared<VariantChoice>(VariantChoice{it->second});
      return variants[it->second].launch();
    }
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(launch.stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone)
    return variants[0].launch();
  std::vector<float> ms;
  FSDPC_RETURN_IF_ERROR(timeVariants(launch.stream, variants, ms));
  int fastest = 0;
  for (int v = 1; v < static_cast<int>(variants.size()); ++v)
    if (ms[v] < ms[fastest])
      fastest = v;
  {
    std::lock_guard<std::mutex> lock(chosen.mutex);
    if (chosen.byShape.emplace(shape, fastest).second) {
      std::string others;
      for (size_t v = 0; v < variants.size(); ++v) {
        if (static_cast<int>(v) == fastest)
          continue;
        char time[32];
        std::snprintf(time, sizeof(time), " %.3f ms", ms[v]);
        others += (others.empty() ? "" : ", ") + variants[v].name + time;
      }
      std::fprintf(stderr, "fsdp-run: note: %s: %s, %.3f ms (%s)\n", shape.c_str(), variants[fastest].name.c_str(),
                   ms[fastest], others.c_str());
    }
  }
  launch.cache = std::make_shared<VariantChoice>(VariantChoice{fastest});
  return variants[fastest].launch();
}

} // namespace fsdpc::runtime::cuda
