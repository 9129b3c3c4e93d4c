#include "fsdpc/runtime/Dataset.h"

#include "fsdpc/runtime/Random.h"

#include "fsdpc/runtime/Npy.h"

#include <cmath>
#include <sys/stat.h>

namespace fsdpc::runtime {

namespace {

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

const char *dtypeName(plan::DType dtype) { return dtype == plan::I64 ? "int64" : "float32"; }

std::vector<int64_t> perSampleShape(const plan::Tensor &tensor) {
  return std::vector<int64_t>(tensor.shape().begin() + (tensor.shape_size() ? 1 : 0), tensor.shape().end());
}

} // namespace

StatusOr<std::unique_ptr<Dataset>> Dataset::fromNpyDirectory(const std::string &dir, const Executor &executor) {
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    return FSDPC_ERROR(kNotFound, "--data: '", dir, "' is not a directory");
  auto dataset = std::unique_ptr<Dataset>(new Dataset());
  std::string firstFile;
  for (int t : executor.inputTensors()) {
    const plan::Tensor &tensor = executor.header().tensors(t);
    std::string path = dir + "/" + tensor.name() + ".npy";
    if (::stat(path.c_str(), &info) != 0)
      return FSDPC_ERROR(kNotFound, "--data: missing '", path, "' for the plan input '", tensor.name(), "'");
    StatusOr<HostArray> array = readNpy(path);
    if (!array.isOk())
      return array.status();
    std::vector<int64_t> expected = perSampleShape(tensor);
    std::vector<int64_t> got(array->shape.begin() + (array->shape.empty() ? 0 : 1), array->shape.end());
    if (array->shape.empty() || got != expected)
      return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' has shape ", shapeString(array->shape),
                         "; the plan input '", tensor.name(), "' needs [num_samples", expected.empty() ? "" : ",",
                         shapeString(expected).substr(1));
    if (array->dtype != tensor.dtype())
      return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' holds ", dtypeName(array->dtype), ", the plan input '",
                         tensor.name(), "' is ", dtypeName(tensor.dtype()));
    if (array->shape[0] == 0)
      return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' holds no samples");
    if (dataset->columns_.empty()) {
      dataset->numSamples_ = array->shape[0];
      firstFile = path;
    } else if (array->shape[0] != dataset->numSamples_) {
      return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' holds ", array->shape[0], " samples but '", firstFile,
                         "' holds ", dataset->numSamples_);
    }
    dataset->columns_.push_back({t, std::move(*array)});
  }
  return dataset;
}

StatusOr<std::unique_ptr<Dataset>> Dataset::synthetic(const Executor &executor, uint64_t seed, int64_t numSamples) {
  auto dataset = std::unique_ptr<Dataset>(new Dataset());
  dataset->numSamples_ = numSamples;
  const plan::PlanHeader &h = executor.header();
  int labelsTensor = -1;
  const HostArray *teacherInput = nullptr;
  for (int t : executor.inputTensors()) {
    const plan::Tensor &tensor = h.tensors(t);
    if (tensor.name() == "labels" && h.loss_kind() != "output") {
      labelsTensor = t;
      continue;
    }
    if (tensor.dtype() != plan::F32)
      return FSDPC_ERROR(kInvalidArgument, "the synthetic dataset makes float inputs only; input '", tensor.name(),
                         "' is int64: pass --data DIR");
    std::vector<int64_t> shape = perSampleShape(tensor);
    shape.insert(shape.begin(), numSamples);
    HostArray samples = HostArray::f32(shape, nullptr);
    int64_t perSample = elementCount(perSampleShape(tensor));
    for (int64_t s = 0; s < numSamples; ++s) {
      NormalStream normal(splitMix64(seed ^ splitMix64(s * 1000003 + t)));
      for (int64_t i = 0; i < perSample; ++i)
        samples.data<float>()[s * perSample + i] = normal.next();
    }
    dataset->columns_.push_back({t, std::move(samples)});
  }
  if (labelsTensor < 0)
    return dataset;
  if (dataset->columns_.empty())
    return FSDPC_ERROR(kInvalidArgument, "the synthetic dataset needs a float model input to derive labels from");
  teacherInput = &dataset->columns_.front().samples;

  // Labels: a fixed random linear map of the first input, argmax per label
  // position for cross entropy, the map itself (scaled) for mse.
  const plan::Tensor &labels = h.tensors(labelsTensor);
  std::vector<int64_t> labelShape = perSampleShape(labels);
  int64_t positions = elementCount(labelShape);
  int64_t features = teacherInput->numElements() / numSamples;
  bool classification = labels.dtype() == plan::I64;
  int64_t classes = classification ? h.num_classes() : 1;
  if (classification && classes < 1)
    return FSDPC_ERROR(kInvalidArgument, "plan does not record the number of classes for synthetic labels");
  int64_t teacherOutputs = positions * classes;
  std::vector<float> teacher(features * teacherOutputs);
  NormalStream normal(splitMix64(seed + 0x7eac4e7));
  for (float &w : teacher)
    w = normal.next() / std::sqrt(static_cast<float>(features));

  labelShape.insert(labelShape.begin(), numSamples);
  HostArray labelSamples;
  labelSamples.dtype = labels.dtype();
  labelSamples.shape = labelShape;
  labelSamples.bytes.resize(numSamples * positions * dtypeSize(labels.dtype()));
  std::vector<float> scores(teacherOutputs);
  for (int64_t s = 0; s < numSamples; ++s) {
    const float *x = teacherInput->data<float>() + s * features;
    std::fill(scores.begin(), scores.end(), 0.0f);
    for (int64_t f = 0; f < features; ++f)
      for (int64_t o = 0; o < teacherOutputs; ++o)
        scores[o] += x[f] * teacher[f * teacherOutputs + o];
    for (int64_t p = 0; p < positions; ++p) {
      if (classification) {
        int64_t best = 0;
        for (int64_t c = 1; c < classes; ++c)
          if (scores[p * classes + c] > scores[p * classes + best])
            best = c;
        labelSamples.data<int64_t>()[s * positions + p] = best;
      } else {
        labelSamples.data<float>()[s * positions + p] = scores[p];
      }
    }
  }
  dataset->columns_.push_back({labelsTensor, std::move(labelSamples)});
  return dataset;
}

Status Dataset::fillBatch(Executor &executor, int64_t stepIndex, int rank, int worldSize) const {
  for (const Column &column : columns_) {
    const plan::Tensor &destination = executor.header().tensors(column.tensorIndex);
    int64_t localBatch = destination.shape().empty() ? 1 : destination.shape(0);
    int64_t globalBatch = localBatch * worldSize;
    size_t sampleBytes = column.samples.bytes.size() / numSamples_;
    // Staged on the host, then one upload per input.
    staging_.resize(localBatch * sampleBytes);
    for (int64_t j = 0; j < localBatch; ++j) {
      int64_t sample = (stepIndex * globalBatch + rank * localBatch + j) % numSamples_;
      std::memcpy(staging_.data() + j * sampleBytes, column.samples.bytes.data() + sample * sampleBytes, sampleBytes);
    }
    FSDPC_RETURN_IF_ERROR(executor.uploadTensor(column.tensorIndex, staging_.data(), staging_.size()));
  }
  return Status::ok();
}

} // namespace fsdpc::runtime
