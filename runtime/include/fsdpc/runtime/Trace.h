//===- Trace.h - Chrome / Perfetto traces of the steps ----------*- C++ -*-===//
//
// fsdp-run --trace FILE.json: every instruction of every step as a slice on
// its rank's compute or communication track, with its op, unit, bytes, step
// and ONNX node, in the Trace Event format that chrome://tracing and
// ui.perfetto.dev open. Each rank records its own timings; at the end they
// are gathered to rank 0, which writes one file.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_TRACE_H
#define FSDPC_RUNTIME_TRACE_H

#include "fsdpc/runtime/Communicator.h"
#include "fsdpc/runtime/Device.h"
#include "fsdpc/runtime/Status.h"
#include "plan.pb.h"

#include <string>
#include <vector>

namespace fsdpc::runtime {

class TraceRecorder {
public:
  explicit TraceRecorder(const plan::PlanHeader &header) : header_(header) {}

  /// One step's timings (Device::lastStepTrace), the step having begun
  /// `stepBegin` seconds after the run began.
  void addStep(int64_t step, double stepBegin, const std::vector<InstructionTiming> &timings);

  /// Gathers every rank's timings to rank 0, which writes `path`
  /// atomically. Every rank must call it (`control` may be null for one).
  Status write(const std::string &path, HostControl *control) const;

private:
  const plan::PlanHeader &header_;
  std::vector<int64_t> steps_;
  std::vector<double> times_; // per step, per instruction: start and end, seconds since the run began
};

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_TRACE_H
