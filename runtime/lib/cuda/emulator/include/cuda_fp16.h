//===- cuda_fp16.h - the CUDA emulator's half precision ---------------------===//
#ifndef FSDPC_CUDA_EMULATOR_CUDA_FP16_H
#define FSDPC_CUDA_EMULATOR_CUDA_FP16_H

#include "fsdpc/runtime/Float16.h"

struct __half {
  uint16_t bits;
};
inline float __half2float(__half h) { return fsdpc::runtime::halfToFloat(h.bits); }
inline __half __float2half_rn(float f) { return {fsdpc::runtime::floatToHalf(f)}; }

#endif // FSDPC_CUDA_EMULATOR_CUDA_FP16_H
