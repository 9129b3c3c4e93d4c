//===- cuda_bf16.h - the CUDA emulator's bfloat16 ---------------------------===//
// Stored bits and the round-to-nearest-even conversions of the toolkit's
// __nv_bfloat16 (the same rule as the CPU backend's Float16.h).
//===----------------------------------------------------------------------===//
#ifndef FSDPC_CUDA_EMULATOR_CUDA_BF16_H
#define FSDPC_CUDA_EMULATOR_CUDA_BF16_H

#include "fsdpc/runtime/Float16.h"

struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 h) { return fsdpc::runtime::bf16ToFloat(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {fsdpc::runtime::floatToBf16(f)}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }

#endif // FSDPC_CUDA_EMULATOR_CUDA_BF16_H
