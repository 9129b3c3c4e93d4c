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

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_PROFILE_H
