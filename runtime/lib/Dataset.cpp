#include "fsdpc/runtime/Dataset.h"

#include "fsdpc/runtime/Random.h"

#include "fsdpc/runtime/Npy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdpc::runtime {

namespace {

/// The label a cross entropy leaves out: torch's default ignore_index,
/// which graph-append-loss gives every loss it appends.
constexpr int64_t kIgnoredLabel = -100;

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
    if (tensor.label()) {
      if (labelsTensor >= 0)
        return FSDPC_ERROR(kInvalidArgument, "the synthetic dataset makes the labels of one loss; this plan's loss ",
                           "reads '", h.tensors(labelsTensor).name(), "' and '", tensor.name(), "': pass --data DIR");
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

namespace {

/// The data of a 1-D .npy of integers in a mapped file: offset, element
/// size and signedness; an error naming the file otherwise.
Status tokenNpyLayout(const std::string &path, const uint8_t *data, size_t size, size_t &offset, int &elementBytes,
                      bool &isSigned, int64_t &count) {
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0)
    return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' is not a .npy file");
  const int major = data[6];
  const size_t headerLength = major == 1 ? (data[8] | data[9] << 8) : (size >= 12 ? (data[8] | data[9] << 8 | data[10] << 16 | static_cast<size_t>(data[11]) << 24) : 0);
  offset = (major == 1 ? 10 : 12) + headerLength;
  if (offset > size)
    return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' has a truncated header");
  const std::string header(reinterpret_cast<const char *>(data) + (major == 1 ? 10 : 12), headerLength);
  struct Kind {
    const char *descr;
    int bytes;
    bool isSigned;
  };
  static const Kind kinds[] = {{"'<u2'", 2, false}, {"'<i4'", 4, true}, {"'<u4'", 4, false}, {"'<i8'", 8, true}};
  const Kind *kind = nullptr;
  for (const Kind &k : kinds)
    if (header.find(k.descr) != std::string::npos)
      kind = &k;
  if (!kind || header.find("'fortran_order': False") == std::string::npos)
    return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' must hold a C-order 1-D array of uint16, int32, ",
                       "uint32 or int64 token ids");
  // A 1-D shape reads "(N,)".
  const size_t open = header.find("'shape': (");
  const size_t close = open == std::string::npos ? std::string::npos : header.find(')', open);
  std::string inner = close == std::string::npos ? "" : header.substr(open + 10, close - open - 10);
  inner.erase(std::remove(inner.begin(), inner.end(), ' '), inner.end());
  if (inner.size() < 2 || inner.back() != ',' ||
      inner.find_first_not_of("0123456789") != inner.size() - 1)
    return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' must hold a 1-D array of token ids");
  count = std::strtoll(inner.c_str(), nullptr, 10);
  elementBytes = kind->bytes;
  isSigned = kind->isSigned;
  if (count < 0 || offset + static_cast<size_t>(count) * elementBytes > size)
    return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' is shorter than its header says");
  return Status::ok();
}

} // namespace

StatusOr<std::unique_ptr<Dataset>> Dataset::fromTokenFile(const std::string &path, const Executor &executor) {
  const plan::PlanHeader &h = executor.header();
  auto stream = std::unique_ptr<TokenStream, void (*)(TokenStream *)>(new TokenStream(), [](TokenStream *s) {
    if (s->mapping)
      ::munmap(s->mapping, s->mappingBytes);
    delete s;
  });
  int others = 0, labelInputs = 0;
  for (int t : executor.inputTensors()) {
    if (h.tensors(t).label()) {
      stream->labelsTensor = t;
      ++labelInputs;
    } else {
      stream->inputTensor = t;
      ++others;
    }
  }
  if (others != 1 || labelInputs != 1)
    return FSDPC_ERROR(kInvalidArgument, "--data '", path, "': a token file feeds a plan with one token input and ",
                       "one labels input; this plan's inputs differ (pass a directory of .npy files)");
  const plan::Tensor &input = h.tensors(stream->inputTensor), &labels = h.tensors(stream->labelsTensor);
  if (input.shape_size() != 2 || labels.shape_size() != 2 || input.shape(1) != labels.shape(1) ||
      input.dtype() != plan::I64 || labels.dtype() != plan::I64)
    return FSDPC_ERROR(kInvalidArgument, "--data '", path, "': the plan's '", input.name(), "' and '", labels.name(),
                       "' must both be int64 [batch, T] for a token file");
  stream->context = input.shape(1);

  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return FSDPC_ERROR(kNotFound, "--data: cannot open '", path, "': ", std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0 || info.st_size == 0) {
    ::close(fd);
    return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' is empty");
  }
  void *mapping = ::mmap(nullptr, info.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED)
    return FSDPC_ERROR(kInvalidArgument, "--data: cannot map '", path, "': ", std::strerror(errno));
  stream->mapping = mapping;
  stream->mappingBytes = info.st_size;
  const auto *bytes = static_cast<const uint8_t *>(mapping);
  size_t offset = 0;
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    FSDPC_RETURN_IF_ERROR(
        tokenNpyLayout(path, bytes, info.st_size, offset, stream->elementBytes, stream->isSigned, stream->count));
  } else {
    // llm.c: 256 int32 (magic 20240520, version 1, token count), then
    // uint16 tokens; anything else is nanoGPT's raw uint16 stream.
    int32_t header[3] = {0, 0, 0};
    if (info.st_size >= 1024)
      std::memcpy(header, bytes, sizeof(header));
    if (header[0] == 20240520) {
      if (header[1] != 1 || header[2] < 0 || 1024 + static_cast<int64_t>(header[2]) * 2 > info.st_size)
        return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' has an llm.c header this reader does not know");
      offset = 1024;
      stream->count = header[2];
    } else {
      stream->count = info.st_size / 2;
    }
    stream->elementBytes = 2;
  }
  stream->tokens = bytes + offset;
  auto dataset = std::unique_ptr<Dataset>(new Dataset());
  dataset->numSamples_ = (stream->count - 1) / stream->context;
  if (dataset->numSamples_ < 1)
    return FSDPC_ERROR(kInvalidArgument, "--data: '", path, "' holds ", stream->count, " tokens, fewer than one window of ",
                       stream->context, " plus one");
  dataset->tokens_ = std::move(stream);
  return dataset;
}

int64_t Dataset::sampleAt(int64_t position) const {
  const int64_t inEpoch = position % numSamples_;
  if (!shuffle_)
    return inEpoch;
  const int64_t epoch = position / numSamples_;
  if (epoch != epoch_) {
    // Fisher-Yates over the epoch's own stream.
    order_.resize(numSamples_);
    for (int64_t i = 0; i < numSamples_; ++i)
      order_[i] = i;
    uint64_t state = splitMix64(shuffleSeed_ ^ splitMix64(static_cast<uint64_t>(epoch)));
    for (int64_t i = numSamples_ - 1; i > 0; --i) {
      state = splitMix64(state);
      std::swap(order_[i], order_[state % static_cast<uint64_t>(i + 1)]);
    }
    epoch_ = epoch;
  }
  return order_[inEpoch];
}

Status Dataset::fillBatch(Executor &executor, int64_t stepIndex, int rank, int worldSize) const {
  if (tokens_) {
    const TokenStream &s = *tokens_;
    const int64_t localBatch = executor.header().tensors(s.inputTensor).shape(0), globalBatch = localBatch * worldSize;
    std::vector<int64_t> input(localBatch * s.context), labels(localBatch * s.context);
    for (int64_t j = 0; j < localBatch; ++j) {
      const int64_t first = sampleAt(stepIndex * globalBatch + rank * localBatch + j) * s.context;
      for (int64_t k = 0; k < s.context; ++k) {
        input[j * s.context + k] = s.token(first + k);
        labels[j * s.context + k] = s.token(first + k + 1);
      }
    }
    FSDPC_RETURN_IF_ERROR(executor.uploadTensor(s.inputTensor, input.data(), input.size() * sizeof(int64_t)));
    FSDPC_RETURN_IF_ERROR(executor.uploadTensor(s.labelsTensor, labels.data(), labels.size() * sizeof(int64_t)));
    return fillLabelCounts(executor, stepIndex, worldSize);
  }
  for (const Column &column : columns_) {
    const plan::Tensor &destination = executor.header().tensors(column.tensorIndex);
    int64_t localBatch = destination.shape().empty() ? 1 : destination.shape(0);
    int64_t globalBatch = localBatch * worldSize;
    size_t sampleBytes = column.samples.bytes.size() / numSamples_;
    // Staged on the host, then one upload per input.
    staging_.resize(localBatch * sampleBytes);
    for (int64_t j = 0; j < localBatch; ++j) {
      int64_t sample = sampleAt(stepIndex * globalBatch + rank * localBatch + j);
      std::memcpy(staging_.data() + j * sampleBytes, column.samples.bytes.data() + sample * sampleBytes, sampleBytes);
    }
    FSDPC_RETURN_IF_ERROR(executor.uploadTensor(column.tensorIndex, staging_.data(), staging_.size()));
  }
  return fillLabelCounts(executor, stepIndex, worldSize);
}

int64_t Dataset::TokenStream::token(int64_t i) const {
  const uint8_t *p = tokens + i * elementBytes;
  switch (elementBytes) {
  case 2: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case 4: {
    if (isSigned) {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  default: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  }
}

Status Dataset::fillLabelCounts(Executor &executor, int64_t stepIndex, int worldSize) const {
  // The same count on every rank: each reads every rank's rows of the step
  // (with gradient accumulation, every micro-batch's) from the dataset.
  for (auto [countTensor, labelsTensor] : executor.labelCounts()) {
    const plan::Tensor &labels = executor.header().tensors(labelsTensor);
    const int64_t localBatch = labels.shape_size() ? labels.shape(0) : 1, globalBatch = localBatch * worldSize;
    const Column *column = nullptr;
    for (const Column &c : columns_)
      if (c.tensorIndex == labelsTensor)
        column = &c;
    if (!column && !(tokens_ && tokens_->labelsTensor == labelsTensor))
      return FSDPC_ERROR(kInvalidArgument, "the data fills no labels '", labels.name(), "' to count");
    int64_t counted = 0;
    for (int64_t j = 0; j < globalBatch; ++j) {
      const int64_t sample = sampleAt(stepIndex * globalBatch + j);
      if (column) {
        const int64_t perSample = column->samples.numElements() / numSamples_;
        const int64_t *values = column->samples.data<int64_t>() + sample * perSample;
        counted += std::count_if(values, values + perSample, [](int64_t v) { return v != kIgnoredLabel; });
      } else {
        for (int64_t k = 1; k <= tokens_->context; ++k)
          counted += tokens_->token(sample * tokens_->context + k) != kIgnoredLabel;
      }
    }
    // A step whose labels are all ignored divides a zero sum by 1: loss and
    // gradients 0 (torch's 0 / 0 would be NaN).
    counted = std::max<int64_t>(counted, 1);
    FSDPC_RETURN_IF_ERROR(executor.uploadTensor(countTensor, &counted, sizeof(counted)));
  }
  return Status::ok();
}

} // namespace fsdpc::runtime
