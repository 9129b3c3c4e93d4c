#include "fsdpc/runtime/PlanFile.h"

#include <algorithm>

#include "fsdpc/runtime/AtomicFile.h"
#include "fsdpc/runtime/KernelContract.h"
#include "fsdpc/runtime/KernelOperands.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstring>

namespace fsdpc::runtime {

namespace {
constexpr size_t kPreambleBytes = 32;

uint64_t alignUp(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

void putU32(uint8_t *out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<uint8_t>(v >> (8 * i));
}
void putU64(uint8_t *out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t getU32(const uint8_t *in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(in[i]) << (8 * i);
  return v;
}
uint64_t getU64(const uint8_t *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}
} // namespace

uint64_t fnv1a64(const void *data, size_t size, uint64_t seed) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  uint64_t hash = seed;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

int64_t numElements(const plan::Tensor &tensor) {
  int64_t n = 1;
  for (int64_t d : tensor.shape())
    n *= d;
  return n;
}

int64_t countTrainableParameters(const plan::PlanHeader &header) {
  int64_t count = 0;
  for (const plan::Tensor &tensor : header.tensors())
    if (tensor.kind() == plan::PARAMETER && tensor.unit().empty())
      count += numElements(tensor);
  for (const plan::Unit &unit : header.units())
    count += unit.flat_size();
  return count;
}

int64_t PlanFile::addSection(const void *src, uint64_t bytes) {
  uint64_t offset = alignUp(data.size(), kSectionAlignment);
  data.resize(offset + bytes);
  if (bytes)
    std::memcpy(data.data() + offset, src, bytes);
  plan::Section *section = header.add_sections();
  section->set_offset(offset);
  section->set_bytes(bytes);
  return header.sections_size() - 1;
}

const uint8_t *PlanFile::sectionData(int64_t index) const { return data.data() + header.sections(index).offset(); }

Status writePlanFile(PlanFile &plan, const std::string &path) {
  // Deterministic serialisation: protobuf writes map fields (an
  // instruction's attributes) in hash-table order otherwise, so compiling
  // the same model twice gave plans with different bytes and hashes.
  std::string headerBytes;
  {
    google::protobuf::io::StringOutputStream stream(&headerBytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!plan.header.SerializeToCodedStream(&coded) || coded.HadError())
      return FSDPC_ERROR(kInternal, "cannot serialise the plan header");
  }
  uint64_t hash = fnv1a64(headerBytes.data(), headerBytes.size());
  plan.contentHash = fnv1a64(plan.data.data(), plan.data.size(), hash);

  uint8_t preamble[kPreambleBytes] = {};
  std::memcpy(preamble, kPlanMagic, sizeof(kPlanMagic));
  putU32(preamble + 8, kPlanFormatVersion);
  putU64(preamble + 16, headerBytes.size());
  putU64(preamble + 24, plan.contentHash);
  uint64_t dataStart = alignUp(kPreambleBytes + headerBytes.size(), kSectionAlignment);
  std::string padding(dataStart - kPreambleBytes - headerBytes.size(), '\0');

  return writeFileAtomically(path, [&](FILE *file) -> Status {
    FSDPC_RETURN_IF_ERROR(writeBytes(file, preamble, sizeof(preamble), path));
    FSDPC_RETURN_IF_ERROR(writeBytes(file, headerBytes.data(), headerBytes.size(), path));
    FSDPC_RETURN_IF_ERROR(writeBytes(file, padding.data(), padding.size(), path));
    return writeBytes(file, plan.data.data(), plan.data.size(), path);
  });
}

StatusOr<PlanFile> readPlanFile(const std::string &path) {
  StatusOr<std::string> contents = readWholeFile(path);
  if (!contents.isOk())
    return contents.status();
  const std::string &bytes = *contents;
  const auto *raw = reinterpret_cast<const uint8_t *>(bytes.data());
  if (bytes.size() < kPreambleBytes || std::memcmp(raw, kPlanMagic, sizeof(kPlanMagic)) != 0)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' is not an fsdpc plan (bad magic)");
  uint32_t version = getU32(raw + 8);
  if (version != kPlanFormatVersion)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' has plan format version ", version, ", this fsdp-run reads ",
                       kPlanFormatVersion);
  uint64_t headerLength = getU64(raw + 16);
  uint64_t storedHash = getU64(raw + 24);
  if (headerLength > bytes.size() - kPreambleBytes)
    return FSDPC_ERROR(kDataLoss, "'", path, "' is truncated (header)");
  uint64_t dataStart = alignUp(kPreambleBytes + headerLength, kSectionAlignment);
  if (dataStart > bytes.size())
    return FSDPC_ERROR(kDataLoss, "'", path, "' is truncated (data)");

  PlanFile plan;
  if (!plan.header.ParseFromArray(raw + kPreambleBytes, static_cast<int>(headerLength)))
    return FSDPC_ERROR(kDataLoss, "'", path, "' has a corrupt plan header");
  plan.data.assign(raw + dataStart, raw + bytes.size());
  uint64_t hash = fnv1a64(raw + kPreambleBytes, headerLength);
  plan.contentHash = fnv1a64(plan.data.data(), plan.data.size(), hash);
  if (plan.contentHash != storedHash)
    return FSDPC_ERROR(kDataLoss, "'", path, "' is corrupt: content hash mismatch");
  FSDPC_RETURN_IF_ERROR(validatePlan(plan));
  return plan;
}

bool isCollective(const std::string &op) {
  return op == "all_gather" || op == "reduce_scatter" || op == "all_reduce";
}

bool isHostCopy(const std::string &op) { return op == "copy_to_device" || op == "copy_to_host"; }

namespace {

/// The parameter maps of a plan instruction.
enum class ParamMap { kInts, kFloats, kIntLists, kStrings };

/// The map a plan file stores a parameter of `type` in.
ParamMap storedIn(contract::AttrType type) {
  switch (type) {
  case contract::AttrType::kBool:
  case contract::AttrType::kInt:
    return ParamMap::kInts;
  case contract::AttrType::kFloat:
    return ParamMap::kFloats;
  case contract::AttrType::kIntList:
    return ParamMap::kIntLists;
  case contract::AttrType::kString:
    return ParamMap::kStrings;
  }
  return ParamMap::kInts;
}

} // namespace

Status checkKernelContract(const plan::Instruction &inst) {
  const contract::KernelSignature *signature = contract::findKernel(inst.op());
  if (!signature)
    return FSDPC_ERROR(kUnimplemented, "plan uses kernel '", inst.op(), "' that this fsdp-run does not have (at ",
                       inst.location(), ")");
  std::string arity = contract::checkArity(*signature, inst.inputs_size(), inst.outputs_size());
  if (!arity.empty())
    return FSDPC_ERROR(kInvalidArgument, "kernel '", inst.op(), "' ", arity, " (at ", inst.location(), ")");
  auto checkAll = [&](const auto &map, ParamMap where) -> Status {
    for (const auto &[name, value] : map) {
      const contract::AttrSpec *spec = signature->findAttr(name);
      if (!spec)
        return FSDPC_ERROR(kInvalidArgument, "kernel '", inst.op(), "' has no parameter '", name, "' (at ",
                           inst.location(), "); was the plan written by another fsdpc?");
      if (storedIn(spec->type) != where)
        return FSDPC_ERROR(kInvalidArgument, "kernel '", inst.op(), "' parameter '", name, "' must be ",
                           contract::attrTypeName(spec->type), " (at ", inst.location(), ")");
    }
    return Status::ok();
  };
  FSDPC_RETURN_IF_ERROR(checkAll(inst.int_attrs(), ParamMap::kInts));
  FSDPC_RETURN_IF_ERROR(checkAll(inst.float_attrs(), ParamMap::kFloats));
  FSDPC_RETURN_IF_ERROR(checkAll(inst.int_list_attrs(), ParamMap::kIntLists));
  FSDPC_RETURN_IF_ERROR(checkAll(inst.string_attrs(), ParamMap::kStrings));
  for (const contract::AttrSpec &spec : signature->attrs) {
    std::string name(spec.name);
    bool present = inst.int_attrs().count(name) || inst.float_attrs().count(name) ||
                   inst.int_list_attrs().count(name) || inst.string_attrs().count(name);
    if (spec.required && !present)
      return FSDPC_ERROR(kInvalidArgument, "kernel '", inst.op(), "' needs parameter '", name, "' (at ",
                         inst.location(), ")");
  }
  return Status::ok();
}

Status validatePlan(const PlanFile &plan) {
  // The content hash catches accidents, not edits: every size and offset
  // below is checked without arithmetic that could wrap around, and sizes
  // are bounded, so that a rewritten plan cannot send a kernel out of its
  // buffers.
  constexpr uint64_t kMaxRegionBytes = uint64_t(1) << 50;
  constexpr int32_t kMaxEvents = 1 << 20;
  constexpr int64_t kMaxClasses = int64_t(1) << 24;
  const plan::PlanHeader &h = plan.header;
  int numTensors = h.tensors_size();
  for (int s = 0; s < h.sections_size(); ++s) {
    const plan::Section &section = h.sections(s);
    if (section.offset() > plan.data.size() || section.bytes() > plan.data.size() - section.offset())
      return FSDPC_ERROR(kDataLoss, "plan section ", s, " lies outside the data area");
  }
  if (h.persistent_bytes() > kMaxRegionBytes || h.transient_bytes() > kMaxRegionBytes ||
      h.host_bytes() > kMaxRegionBytes)
    return FSDPC_ERROR(kInvalidArgument, "plan regions of ", h.persistent_bytes(), ", ", h.transient_bytes(), " and ",
                       h.host_bytes(), " bytes exceed 2^50 bytes");
  if (h.num_events() < 0 || h.num_events() > kMaxEvents)
    return FSDPC_ERROR(kInvalidArgument, "plan has ", h.num_events(), " events");
  if (h.num_classes() < 0 || h.num_classes() > kMaxClasses)
    return FSDPC_ERROR(kInvalidArgument, "plan has ", h.num_classes(), " classes");
  for (int t = 0; t < numTensors; ++t) {
    const plan::Tensor &tensor = h.tensors(t);
    size_t elementBytes = dtypeSize(tensor.dtype());
    if (elementBytes == 0)
      return FSDPC_ERROR(kInvalidArgument, "plan tensor '", tensor.name(), "' has an unknown dtype");
    for (int64_t d : tensor.shape())
      if (d < 0)
        return FSDPC_ERROR(kInvalidArgument, "plan tensor '", tensor.name(), "' has a negative dimension");
    const std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
    const int64_t bytes = checkedByteSize(shape, static_cast<int64_t>(elementBytes), kMaxRegionBytes);
    if (bytes < 0 || tensor.bytes() != static_cast<uint64_t>(bytes))
      return FSDPC_ERROR(kInvalidArgument, "plan tensor '", tensor.name(), "' has a byte size that does not match its shape");
    uint64_t regionBytes = tensor.region() == plan::PERSISTENT ? h.persistent_bytes()
                           : tensor.region() == plan::HOST     ? h.host_bytes()
                                                               : h.transient_bytes();
    if (tensor.region() != plan::PERSISTENT && tensor.region() != plan::TRANSIENT_ARENA &&
        tensor.region() != plan::HOST)
      return FSDPC_ERROR(kInvalidArgument, "plan tensor '", tensor.name(), "' has no region");
    if (tensor.offset() > regionBytes || tensor.bytes() > regionBytes - tensor.offset())
      return FSDPC_ERROR(kInvalidArgument, "plan tensor '", tensor.name(), "' lies outside its region");
    // Kernels of every backend access elements through typed pointers; the
    // regions' bases are 64-byte aligned, so an element-aligned offset is
    // what each tensor needs.
    if (tensor.offset() % elementBytes != 0)
      return FSDPC_ERROR(kInvalidArgument, "plan tensor '", tensor.name(), "' has offset ", tensor.offset(),
                         ", not a multiple of its ", elementBytes, "-byte element");
    if (tensor.init_section() >= h.sections_size())
      return FSDPC_ERROR(kInvalidArgument, "plan tensor '", tensor.name(), "' names a missing section");
    if (tensor.init_section() >= 0 && h.sections(tensor.init_section()).bytes() != tensor.bytes())
      return FSDPC_ERROR(kInvalidArgument, "plan tensor '", tensor.name(), "' and its initial value differ in size");
  }
  for (const plan::Instruction &inst : h.instructions()) {
    for (int id : inst.inputs())
      if (id < 0 || id >= numTensors)
        return FSDPC_ERROR(kInvalidArgument, "instruction '", inst.op(), "' reads a missing tensor ", id);
    for (int id : inst.outputs())
      if (id < 0 || id >= numTensors)
        return FSDPC_ERROR(kInvalidArgument, "instruction '", inst.op(), "' writes a missing tensor ", id);
    bool isEvent = inst.op() == "record_event" || inst.op() == "wait_event";
    if (isEvent && (inst.event() < 0 || inst.event() >= h.num_events()))
      return FSDPC_ERROR(kInvalidArgument, "instruction '", inst.op(), "' names a missing event ", inst.event());
    // Where each instruction runs decides which memory it may touch: host
    // kernels the HOST region only, device kernels and collectives none of
    // it, copies one side each.
    auto onHost = [&](int id) { return h.tensors(id).region() == plan::HOST; };
    if (isHostCopy(inst.op())) {
      if (inst.inputs_size() != 1 || inst.outputs_size() != 1)
        return FSDPC_ERROR(kInvalidArgument, "instruction '", inst.op(), "' needs one input and one output");
      const plan::Tensor &from = h.tensors(inst.inputs(0)), &to = h.tensors(inst.outputs(0));
      const bool toDevice = inst.op() == "copy_to_device";
      if (from.bytes() != to.bytes() || from.dtype() != to.dtype() || onHost(inst.inputs(0)) != toDevice ||
          onHost(inst.outputs(0)) == toDevice || inst.on_host())
        return FSDPC_ERROR(kInvalidArgument, "instruction '", inst.op(), "' copies '", from.name(), "' into '",
                           to.name(), "', which are not the same size on the sides it names");
      continue;
    }
    if (!isEvent) {
      const bool wantHost = inst.on_host() && !isCollective(inst.op());
      for (const auto *ids : {&inst.inputs(), &inst.outputs()})
        for (int id : *ids)
          if (onHost(id) != wantHost)
            return FSDPC_ERROR(kInvalidArgument, "instruction '", inst.op(), "' runs on the ",
                               wantHost ? "host" : "device", " but touches '", h.tensors(id).name(),
                               wantHost ? "' in device memory" : "' in host memory", " (at ", inst.location(), ")");
    }
    if (!isEvent && !isCollective(inst.op())) {
      FSDPC_RETURN_IF_ERROR(checkKernelContract(inst));
      // Dtypes and shapes against the kernel's rule, on views that hold no
      // data: the same views the executor hands the kernel.
      const DecodedParams params = decodeParams(inst);
      KernelCall call;
      call.instruction = &inst;
      call.params = &params;
      auto view = [&](int id) {
        const plan::Tensor &tensor = h.tensors(id);
        return TensorView{nullptr, tensor.dtype(), std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end())};
      };
      for (int id : inst.inputs())
        call.inputs.push_back(view(id));
      for (int id : inst.outputs())
        call.outputs.push_back(view(id));
      FSDPC_RETURN_IF_ERROR(checkKernelOperands(call));
    }
  }
  if (h.loss_tensor() >= numTensors || (h.loss_tensor() < 0 && h.output_tensors().empty()))
    return FSDPC_ERROR(kInvalidArgument, "plan has neither a loss tensor nor outputs");
  if (h.has_grad_norm_tensor() &&
      (h.grad_norm_tensor() < 0 || h.grad_norm_tensor() >= numTensors ||
       h.tensors(h.grad_norm_tensor()).dtype() != plan::F32 || numElements(h.tensors(h.grad_norm_tensor())) != 1))
    return FSDPC_ERROR(kInvalidArgument, "plan's gradient norm is not one f32 element of a tensor it has");
  if (h.has_forward_output_tensor() &&
      (!h.has_forward_instructions() || h.forward_output_tensor() < 0 || h.forward_output_tensor() >= numTensors))
    return FSDPC_ERROR(kInvalidArgument, "plan's forward output is not a tensor of a marked forward pass");
  if (h.has_forward_instructions() != h.has_forward_loss_tensor() ||
      (h.has_forward_instructions() &&
       (h.forward_instructions() < 1 || h.forward_instructions() > h.instructions_size() ||
        h.forward_loss_tensor() < 0 || h.forward_loss_tensor() >= numTensors ||
        h.tensors(h.forward_loss_tensor()).dtype() != plan::F32 || numElements(h.tensors(h.forward_loss_tensor())) != 1)))
    return FSDPC_ERROR(kInvalidArgument, "plan's forward pass is not a prefix of its instructions ending in a loss");
  if (h.has_forward_output_instructions() && (!h.has_forward_output_tensor() || h.forward_output_instructions() < 1 ||
                                              h.forward_output_instructions() > h.forward_instructions()))
    return FSDPC_ERROR(kInvalidArgument, "plan's forward output prefix is not within its forward pass");
  for (int id : h.output_tensors())
    if (id < 0 || id >= numTensors)
      return FSDPC_ERROR(kInvalidArgument, "plan names a missing output tensor ", id);
  const int64_t groupSize = std::max(h.shard_group_size(), 1);
  for (const plan::Unit &unit : h.units()) {
    if (unit.shard_tensor() < 0 || unit.shard_tensor() >= numTensors ||
        h.tensors(unit.shard_tensor()).kind() != plan::PARAMETER)
      return FSDPC_ERROR(kInvalidArgument, "unit '", unit.name(), "' names no parameter shard tensor");
    if (unit.padded_size() < unit.flat_size() || unit.padded_size() % groupSize != 0 ||
        numElements(h.tensors(unit.shard_tensor())) * groupSize != unit.padded_size())
      return FSDPC_ERROR(kInvalidArgument, "unit '", unit.name(), "' has a shard that does not match its padded size");
    bool omitted = h.weights_omitted() && unit.init_section() == -1;
    if (!omitted && (unit.init_section() < 0 || unit.init_section() >= h.sections_size() ||
                     h.sections(unit.init_section()).bytes() != static_cast<uint64_t>(unit.padded_size()) * sizeof(float)))
      return FSDPC_ERROR(kInvalidArgument, "unit '", unit.name(), "' has no initial value of its padded size");
    for (const plan::UnitParam &param : unit.params()) {
      const int64_t count =
          checkedByteSize(std::vector<int64_t>(param.shape().begin(), param.shape().end()), 1, unit.flat_size());
      if (param.offset() < 0 || count < 0 || param.offset() > unit.flat_size() - count)
        return FSDPC_ERROR(kInvalidArgument, "unit '", unit.name(), "' places parameter '", param.name(),
                           "' outside its flat parameter");
    }
  }
  if (h.world_size() < 1)
    return FSDPC_ERROR(kInvalidArgument, "plan has world size ", h.world_size());
  return Status::ok();
}

bool isCheckpointedState(const plan::Tensor &tensor) {
  // Gradient shards are recomputed every step, and a label count is
  // written with every batch, so they are not state.
  return (tensor.region() == plan::PERSISTENT || tensor.region() == plan::HOST) && tensor.kind() != plan::VIEW &&
         tensor.kind() != plan::CONSTANT && tensor.kind() != plan::GRADIENT && tensor.kind() != plan::TRANSIENT &&
         tensor.kind() != plan::LABEL_COUNT;
}

namespace {

std::string shapeText(const google::protobuf::RepeatedField<int64_t> &shape) {
  std::string out = "[";
  for (int64_t d : shape)
    out += std::to_string(d) + ",";
  return out + "]";
}

/// The hashes' text: every unit (with `unitLine` its first line) and its
/// parameters, then one line per checkpointed tensor (`stateLine`), in name
/// order so that plans placing the same tensors in another order (buckets,
/// clipping) hash the same. Every field with separators, so no two layouts
/// read the same.
template <typename UnitLine, typename StateLine>
uint64_t hashLayout(const plan::PlanHeader &h, std::string text, UnitLine unitLine, StateLine stateLine) {
  for (const plan::Unit &unit : h.units()) {
    text += unitLine(unit);
    for (const plan::UnitParam &param : unit.params())
      text += " param " + param.name() + " " + shapeText(param.shape()) + " " + std::to_string(param.offset()) + "\n";
  }
  std::vector<std::string> state;
  for (const plan::Tensor &tensor : h.tensors())
    if (isCheckpointedState(tensor))
      state.push_back(stateLine(tensor));
  std::sort(state.begin(), state.end());
  for (const std::string &line : state)
    text += line;
  return fnv1a64(text.data(), text.size());
}

} // namespace

uint64_t layoutHash(const plan::PlanHeader &h) {
  return hashLayout(
      h,
      "world " + std::to_string(h.world_size()) + " group " + std::to_string(h.shard_group_size()) + " strategy " +
          h.strategy() + "\n",
      [](const plan::Unit &unit) {
        return "unit " + unit.name() + " " + std::to_string(unit.flat_size()) + " " +
               std::to_string(unit.padded_size()) + "\n";
      },
      [](const plan::Tensor &tensor) {
        return "state " + tensor.name() + " " + std::to_string(tensor.kind()) + " " + std::to_string(tensor.dtype()) +
               " " + shapeText(tensor.shape()) + "\n";
      });
}

uint64_t unitLayoutHash(const plan::PlanHeader &h) {
  // Without what depends on how the state is split: world, group, padding,
  // the shapes of unit shards.
  return hashLayout(
      h, "", [](const plan::Unit &unit) { return "unit " + unit.name() + " " + std::to_string(unit.flat_size()) + "\n"; },
      [](const plan::Tensor &tensor) {
        return "state " + tensor.name() + " " + std::to_string(tensor.kind()) + " " + std::to_string(tensor.dtype()) +
               " unit " + tensor.unit() + " slot " + tensor.optimizer_slot() +
               (tensor.unit().empty() ? " " + shapeText(tensor.shape()) : std::string()) + "\n";
      });
}

} // namespace fsdpc::runtime
