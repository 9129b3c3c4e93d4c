//===- Trace.cpp - Chrome / Perfetto traces of the steps ------------------===//
#include "fsdpc/runtime/Trace.h"

#include "fsdpc/runtime/AtomicFile.h"
#include "fsdpc/runtime/HostArray.h"

#include <cinttypes>
#include <cstdio>

namespace fsdpc::runtime {

namespace {

std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

/// What a slice says about its instruction, the same on every rank.
struct SliceInfo {
  std::string name, args;
  int track = 0; // 0 compute, 1 communication
  bool instant = false;
};

std::vector<SliceInfo> describe(const plan::PlanHeader &h) {
  std::vector<SliceInfo> infos;
  for (const plan::Instruction &inst : h.instructions()) {
    SliceInfo info;
    info.name = inst.op();
    info.track = inst.stream() == plan::COMMUNICATION ? 1 : 0;
    info.instant = inst.op() == "record_event";
    // The unit: the first operand that belongs to one (a shard, a gathered
    // unit, a flat gradient).
    std::string unit;
    uint64_t bytes = 0;
    for (const auto *ids : {&inst.inputs(), &inst.outputs()})
      for (int id : *ids) {
        if (unit.empty() && !h.tensors(id).unit().empty())
          unit = h.tensors(id).unit();
      }
    for (int id : inst.outputs())
      bytes += h.tensors(id).bytes();
    if (inst.op() == "reduce_scatter")
      for (int id : inst.inputs())
        bytes = std::max<uint64_t>(bytes, h.tensors(id).bytes());
    info.args = "\"bytes\": " + std::to_string(bytes);
    if (!unit.empty())
      info.args += ", \"unit\": " + jsonString(unit);
    if (inst.op() == "record_event" || inst.op() == "wait_event")
      info.args += ", \"event\": " + std::to_string(inst.event());
    if (!inst.location().empty())
      info.args += ", \"node\": " + jsonString(inst.location());
    infos.push_back(std::move(info));
  }
  return infos;
}

} // namespace

void TraceRecorder::addStep(int64_t step, double stepBegin, const std::vector<InstructionTiming> &timings) {
  steps_.push_back(step);
  for (int i = 0; i < header_.instructions_size(); ++i) {
    const InstructionTiming t = i < static_cast<int>(timings.size()) ? timings[i] : InstructionTiming();
    times_.push_back(stepBegin + t.start);
    times_.push_back(stepBegin + t.end);
  }
}

Status TraceRecorder::write(const std::string &path, HostControl *control) const {
  const int worldSize = control ? control->worldSize() : 1, rank = control ? control->rank() : 0;
  // Every rank ran the same plan for the same steps: equal sizes.
  std::vector<double> all(rank == 0 ? times_.size() * worldSize : 0);
  if (worldSize > 1)
    FSDPC_RETURN_IF_ERROR(control->gatherBytesToFirst(times_.data(), rank == 0 ? all.data() : nullptr,
                                                      times_.size() * sizeof(double), Group{worldSize, 1}));
  else
    all = times_;
  if (rank != 0)
    return Status::ok();
  const std::vector<SliceInfo> infos = describe(header_);
  const size_t perStep = infos.size() * 2;
  return writeFileAtomically(path, [&](FILE *f) -> Status {
    std::string text = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
    for (int r = 0; r < worldSize; ++r) {
      text += "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(r) +
              ", \"args\": {\"name\": \"rank " + std::to_string(r) + "\"}},\n";
      for (int track = 0; track < 2; ++track)
        text += "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(r) +
                ", \"tid\": " + std::to_string(track) + ", \"args\": {\"name\": \"" +
                (track ? "communication" : "compute") + "\"}},\n";
    }
    for (int r = 0; r < worldSize; ++r) {
      const double *rankTimes = all.data() + r * times_.size();
      for (size_t s = 0; s < steps_.size(); ++s) {
        for (size_t i = 0; i < infos.size(); ++i) {
          const SliceInfo &info = infos[i];
          const double start = rankTimes[s * perStep + 2 * i], end = rankTimes[s * perStep + 2 * i + 1];
          char timing[96];
          if (info.instant)
            std::snprintf(timing, sizeof(timing), "\"ph\": \"i\", \"s\": \"t\", \"ts\": %.3f", start * 1e6);
          else
            std::snprintf(timing, sizeof(timing), "\"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f", start * 1e6,
                          (end - start) * 1e6);
          text += "{\"name\": " + jsonString(info.name) + ", \"cat\": \"" + (info.track ? "communication" : "compute") +
                  "\", " + timing + ", \"pid\": " + std::to_string(r) + ", \"tid\": " + std::to_string(info.track) +
                  ", \"args\": {\"step\": " + std::to_string(steps_[s]) + ", " + info.args + "}},\n";
        }
        if (text.size() > (1u << 20)) {
          FSDPC_RETURN_IF_ERROR(writeBytes(f, text.data(), text.size(), path));
          text.clear();
        }
      }
    }
    // The format allows no trailing comma: end with one last metadata event.
    text += "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 0, \"args\": {\"sort_index\": 0}}\n]}\n";
    return writeBytes(f, text.data(), text.size(), path);
  });
}

} // namespace fsdpc::runtime
