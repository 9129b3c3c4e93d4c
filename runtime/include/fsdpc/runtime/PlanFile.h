//===- PlanFile.h - Reading and writing plan.bin ----------------*- C++ -*-===//
//
// Layout (all integers little endian):
//   0  char[8]  magic "FSDPPLAN"
//   8  uint32   format version
//  12  uint32   reserved, 0
//  16  uint64   header length in bytes
//  24  uint64   content hash: FNV-1a 64 over the header bytes, then the data
//  32  bytes    PlanHeader (protobuf)
//      padding to a multiple of 64
//      data area: the sections, each at a 64-byte-aligned offset
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_PLANFILE_H
#define FSDPC_RUNTIME_PLANFILE_H

#include "fsdpc/runtime/HostArray.h"
#include "fsdpc/runtime/Status.h"
#include "plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdpc::runtime {

inline constexpr char kPlanMagic[8] = {'F', 'S', 'D', 'P', 'P', 'L', 'A', 'N'};
// 2: kernel parameters follow the kernel contract (KernelContract.h); the
// losses' and collectives' `reduction` is a string, no longer a `mean` flag.
inline constexpr uint32_t kPlanFormatVersion = 2;
inline constexpr uint64_t kSectionAlignment = 64;

struct PlanFile {
  plan::PlanHeader header;
  /// The data area; sections index into it.
  std::vector<uint8_t> data;
  /// Filled by readPlanFile; computed by writePlanFile.
  uint64_t contentHash = 0;

  /// Appends a section holding `bytes` bytes copied from `src`, returns its index.
  int64_t addSection(const void *src, uint64_t bytes);
  const uint8_t *sectionData(int64_t index) const;
};

uint64_t fnv1a64(const void *data, size_t size, uint64_t seed = 0xcbf29ce484222325ULL);

/// Writes atomically: a temporary file in the same folder, then rename.
Status writePlanFile(PlanFile &plan, const std::string &path);
StatusOr<PlanFile> readPlanFile(const std::string &path);

/// Checks the header's internal consistency (tensor indices, section bounds,
/// region bounds), so the executor can trust it.
Status validatePlan(const PlanFile &plan);

/// Whether `op` names a collective (all_gather, reduce_scatter, all_reduce).
bool isCollective(const std::string &op);
/// Whether `op` names a copy between the HOST region and device memory
/// (copy_to_device, copy_to_host: fsdpc --offload's staging).
bool isHostCopy(const std::string &op);

/// Checks a compute instruction against the kernel contract: a known kernel,
/// its operand counts, and its parameters' names, types and presence.
Status checkKernelContract(const plan::Instruction &inst);

int64_t numElements(const plan::Tensor &tensor);

/// The model's trainable parameters: units' flat sizes (without padding) and
/// parameters outside units.
int64_t countTrainableParameters(const plan::PlanHeader &header);

/// Whether a rank's checkpoint holds `tensor`: its persistent tensors (in
/// the persistent or, offloaded, the host region) but views, constants,
/// gradient shards (recomputed every step) and host staging copies.
bool isCheckpointedState(const plan::Tensor &tensor);

/// A hash of what a sharded checkpoint holds and how: the world size, shard
/// group and strategy, every unit (name, sizes, parameters with shapes and
/// offsets) and every tensor of a rank's local state (name, kind, dtype,
/// shape). Learning rate, schedule, clipping or kernel choices do not enter
/// it, so a plan recompiled with other hyperparameters resumes the same
/// checkpoint.
uint64_t layoutHash(const plan::PlanHeader &header);

/// The part of layoutHash that does not depend on how the state is split
/// over ranks: every unit (name, flat size, parameters with shapes and
/// offsets) and every state tensor's name, kind, dtype, unit and slot (and
/// shape, outside units). Checkpoints with equal unit layouts reshard into
/// each other across world sizes and strategies.
uint64_t unitLayoutHash(const plan::PlanHeader &header);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_PLANFILE_H
