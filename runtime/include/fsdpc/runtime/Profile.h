//===- Profile.h - fsdp-run --profile's time per kernel ----------*- C++ -*-===//
//
// The devices time each instruction (Device::instructionSeconds); this sums
// those times by kernel, with the work the instructions did: the
// floating-point operations of the GEMMs and attention, and the bytes every
// instruction's operands hold. Time and work together give each kernel's
// rate (TFLOP/s, GB/s), which says how far it is from the device's peak and
// so which kernel to work on. Device-neutral: the work comes from the
// plan's shapes.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_PROFILE_H
#define FSDPC_RUNTIME_PROFILE_H

#include "plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdpc::runtime {

/// One kernel (or collective, " (comm)") of the profiled steps.
struct KernelProfile {
  std::string op;
  int64_t calls = 0;  // instructions run, over all profiled steps
  double seconds = 0; // their time
  double flops = 0;   // their floating-point operations (0: not counted)
  double bytes = 0;   // the bytes of their operands, inputs and outputs
};

/// Floating-point operations of one instruction: 2 M N K for a GEMM
/// (matmul, matmul_bias, batch_matmul), 4 pairs D for attention's forward
/// (the scores and the product with the value, for every query-key pair:
/// the dense count; a causal mask skips about half) and 2.5 times that for
/// its backward (five products to the forward's two); 0 for other ops.
double instructionFlops(const plan::PlanHeader &header, const plan::Instruction &inst);

/// The bytes of an instruction's operands, each counted once per use.
double instructionBytes(const plan::PlanHeader &header, const plan::Instruction &inst);

/// `seconds` (per plan instruction, Device::instructionSeconds, summed over
/// `steps` steps) summed by kernel, largest first, with the calls and work
/// of those steps; instructions that took no time (events) left out.
std::vector<KernelProfile> summarizeProfile(const plan::PlanHeader &header, const std::vector<double> &seconds,
                                            int64_t steps);

/// One instruction of the profiled steps, for the table of the slowest.
struct InstructionProfile {
  int index = 0;            // in the plan's instruction list
  std::string op;           // its kernel
  std::string operands;     // inputs -> outputs as shapes and dtypes, and a GEMM's transpositions
  std::string location;     // the ONNX node(s) it came from
  double secondsPerCall = 0;
  double flopsPerCall = 0;  // 0: not counted
};

/// The `count` instructions that took longest per step, longest first: a
/// kernel's total (summarizeProfile) says which kernel to work on, these
/// say which of its shapes.
std::vector<InstructionProfile> slowestInstructions(const plan::PlanHeader &header, const std::vector<double> &seconds,
                                                    int64_t steps, int count);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_PROFILE_H
