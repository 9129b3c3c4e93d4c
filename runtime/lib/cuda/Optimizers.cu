//===- Optimizers.cu - SGD and AdamW over a unit's flat shard -------------===//
//
// One launch per unit and step, in place, with the float operations in
// torch.optim's order (foreach=False), as the CPU kernels. The step count
// lives in device memory, so the scalars derived from it (AdamW's bias
// corrections) are computed on the device, in double, then rounded to
// float exactly as the CPU kernel rounds them.
// The gradient may be bf16 / f16: a mixed-precision plan on one rank hands
// the update its 16-bit gradient instead of an f32 copy (the lowering drops
// the cast); it is widened exactly, so the numbers are the cast's.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"
#include "fsdpc/runtime/LrSchedule.h"

namespace fsdpc::runtime::cuda {

namespace {

/// The learning rate's schedule, evaluated on the device from the step
/// counter (LrSchedule.h, shared with the CPU kernels).
struct Schedule {
  double lr;
  int kind;
  long long warmup, total;
  double minLr;
  __device__ double at(long long step) const { return scheduledLr(lr, kind, warmup, total, minLr, step); }
};

Status scheduleOf(const KernelCall &call, Schedule &schedule) {
  schedule.kind = lrScheduleKind(call.stringParam(contract::Param::kLrSchedule, "constant"));
  if (schedule.kind < 0)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": unknown lr_schedule '",
                       call.stringParam(contract::Param::kLrSchedule, ""), "'");
  schedule.lr = call.floatParam(contract::Param::kLr, 1e-3);
  schedule.warmup = call.intParam(contract::Param::kWarmupSteps, 0);
  schedule.total = call.intParam(contract::Param::kTotalSteps, 0);
  schedule.minLr = call.floatParam(contract::Param::kMinLr, 0);
  return Status::ok();
}

/// A gradient element as f32: itself, or a 16-bit one widened exactly.
__device__ __forceinline__ float gradientAt(const float *g, long long i) { return g[i]; }
__device__ __forceinline__ float gradientAt(const __nv_bfloat16 *g, long long i) { return widen(g[i]); }
__device__ __forceinline__ float gradientAt(const __half *g, long long i) { return widen(g[i]); }

/// Gradient elements 4i .. 4i + 3 in one access (16 bytes of f32, 8 of a
/// 16-bit type; the caller checked the alignment).
__device__ __forceinline__ float4 gradientFour(const float *g, long long i) {
  return reinterpret_cast<const float4 *>(g)[i];
}
template <typename Half> struct alignas(8) FourHalves {
  Half h[4];
};
template <typename Half> __device__ __forceinline__ float4 gradientFour(const Half *g, long long i) {
  const FourHalves<Half> word = reinterpret_cast<const FourHalves<Half> *>(g)[i];
  float4 four;
  four.x = widen(word.h[0]);
  four.y = widen(word.h[1]);
  four.z = widen(word.h[2]);
  four.w = widen(word.h[3]);
  return four;
}

template <typename G>
__global__ void sgdKernel(float *p, const G *g, float *buf, const long long *step, long long n, Schedule schedule,
                          double momentum, double dampening, double weightDecay, bool nesterov) {
  const bool firstStep = step[0] == 1;
  const double lr = schedule.at(step[0]);
  const float wd = static_cast<float>(weightDecay), mom = static_cast<float>(momentum);
  const float damp = static_cast<float>(1 - dampening), negLr = static_cast<float>(-lr);
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    // Rounded operation by operation (no FMA contraction), as on the CPU.
    const float gi = gradientAt(g, i);
    float d = weightDecay != 0 ? __fadd_rn(gi, __fmul_rn(wd, p[i])) : gi;
    if (buf) {
      buf[i] = firstStep ? d : __fadd_rn(__fmul_rn(buf[i], mom), __fmul_rn(damp, d));
      d = nesterov ? __fadd_rn(d, __fmul_rn(mom, buf[i])) : buf[i];
    }
    p[i] = __fadd_rn(p[i], __fmul_rn(negLr, d));
  }
}

/// AdamW's scalars for one step, from the step count on the device.
struct AdamwStep {
  float decay, b1, oneMinusB1, b2, oneMinusB2, negStepSize, bc2Sqrt, eps;
};
__device__ __forceinline__ AdamwStep adamwStepOf(const long long *stepCount, const Schedule &schedule, double beta1,
                                                 double beta2, double eps, double weightDecay) {
  const double step = static_cast<double>(stepCount[0]);
  const double lr = schedule.at(stepCount[0]);
  const double biasCorrection1 = 1 - pow(beta1, step), biasCorrection2 = 1 - pow(beta2, step);
  return {static_cast<float>(1 - lr * weightDecay), static_cast<float>(beta1), static_cast<float>(1 - beta1),
          static_cast<float>(beta2),                static_cast<float>(1 - beta2),
          static_cast<float>(-(lr / biasCorrection1)), static_cast<float>(sqrt(biasCorrection2)),
          static_cast<float>(eps)};
}

/// One element: __fmul_rn / __fadd_rn, no contraction into FMAs, so each
/// operation rounds as torch's separate tensor operations (and the CPU
/// kernel) do.
__device__ __forceinline__ void adamwElement(const AdamwStep &a, float &p, float g, float &m, float &v) {
  const float pi = __fmul_rn(p, a.decay);
  float mi = __fmul_rn(m, a.b1);
  mi = __fadd_rn(mi, __fmul_rn(a.oneMinusB1, g));
  float vi = __fmul_rn(v, a.b2);
  vi = __fadd_rn(vi, __fmul_rn(a.oneMinusB2, __fmul_rn(g, g)));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), a.bc2Sqrt), a.eps);
  p = __fadd_rn(pi, __fmul_rn(a.negStepSize, __fdiv_rn(mi, denom)));
  m = mi;
  v = vi;
}

/// With Vector (every buffer 16-byte aligned), four elements per 16-byte
/// access and the last n % 4 one by one: on the H200 the one-element loop
/// moved 1.8 TB/s.
template <bool Vector, typename G>
__global__ void adamwKernel(float *p, const G *g, float *m, float *v, const long long *stepCount, long long n,
                            Schedule schedule, double beta1, double beta2, double eps, double weightDecay) {
  const AdamwStep a = adamwStepOf(stepCount, schedule, beta1, beta2, eps, weightDecay);
  const long long vectors = Vector ? n / 4 : 0;
  FSDPC_GRID_STRIDE_LOOP(i, vectors) {
    float4 pi = reinterpret_cast<float4 *>(p)[i], mi = reinterpret_cast<float4 *>(m)[i],
           vi = reinterpret_cast<float4 *>(v)[i];
    const float4 gi = gradientFour(g, i);
    adamwElement(a, pi.x, gi.x, mi.x, vi.x);
    adamwElement(a, pi.y, gi.y, mi.y, vi.y);
    adamwElement(a, pi.z, gi.z, mi.z, vi.z);
    adamwElement(a, pi.w, gi.w, mi.w, vi.w);
    reinterpret_cast<float4 *>(p)[i] = pi;
    reinterpret_cast<float4 *>(m)[i] = mi;
    reinterpret_cast<float4 *>(v)[i] = vi;
  }
  FSDPC_GRID_STRIDE_LOOP(j, n - 4 * vectors) {
    const long long i = 4 * vectors + j;
    adamwElement(a, p[i], gradientAt(g, i), m[i], v[i]);
  }
}

constexpr int kSumThreads = 1024;

/// One block adds the squares of `x` (in double, in a fixed order) to
/// `*total`; the first input of a call starts it at zero.
__global__ void sumSquaresKernel(const float *x, long long n, double *total, bool first) {
  __shared__ double shared[32];
  double partial = 0;
  for (long long i = threadIdx.x; i < n; i += blockDim.x)
    partial += static_cast<double>(x[i]) * x[i];
  const double sum = blockSum(partial, shared);
  if (threadIdx.x == 0)
    *total = (first ? 0.0 : *total) + sum;
}

__global__ void storeTotalKernel(const double *total, float *y) { *y = static_cast<float>(*total); }

__global__ void clipCoefficientKernel(const float *sq, float *scale, float *norm, float maxNorm) {
  const float total = __fsqrt_rn(*sq);
  *norm = total;
  *scale = fminf(__fdiv_rn(maxNorm, __fadd_rn(total, 1e-6f)), 1.0f);
}

} // namespace

uint64_t sumSquaresScratch(const KernelCall &) { return sizeof(double); }

Status sumSquares(const KernelCall &call) {
  const TensorView &y = call.outputs[0];
  if (y.numElements() != 1 || y.dtype != plan::F32)
    return FSDPC_ERROR(kInvalidArgument, "sum_squares: output must be one f32 element");
  const CudaLaunch &launch = launchOf(call);
  if (launch.scratchBytes < sizeof(double))
    return FSDPC_ERROR(kInternal, "sum_squares: scratch too small");
  auto *total = static_cast<double *>(launch.scratch);
  // One block per input, launched in order on the stream: the sum has the
  // same order on every run (a gradient norm is a few reads of the shards).
  bool first = true;
  for (const TensorView &x : call.inputs) {
    if (x.dtype != plan::F32)
      return FSDPC_ERROR(kInvalidArgument, "sum_squares: inputs must be f32");
    launchKernel(sumSquaresKernel, 1, kSumThreads, 0, launch.stream, x.f32(), x.numElements(), total, first);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
    first = false;
  }
  launchKernel(storeTotalKernel, 1, 1, 0, launch.stream, total, y.f32());
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status clipCoefficient(const KernelCall &call) {
  const TensorView &sq = call.inputs[0], &scale = call.outputs[0], &norm = call.outputs[1];
  if (sq.numElements() != 1 || scale.numElements() != 1 || norm.numElements() != 1)
    return FSDPC_ERROR(kInvalidArgument, "clip_coefficient: operands must be one element each");
  const CudaLaunch &launch = launchOf(call);
  launchKernel(clipCoefficientKernel, 1, 1, 0, launch.stream, sq.f32(), scale.f32(), norm.f32(),
               static_cast<float>(call.floatParam(contract::Param::kMaxNorm, 1.0)));
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

/// Launches `kernel<G>` with the gradient `grad` as a G pointer: f32, bf16
/// or f16.
template <typename Launch> Status withGradientType(const KernelCall &call, const TensorView &grad, Launch launch) {
  switch (grad.dtype) {
  case plan::F32:
    return launch(static_cast<const float *>(grad.data));
  case plan::BF16:
    return launch(static_cast<const __nv_bfloat16 *>(grad.data));
  case plan::F16:
    return launch(static_cast<const __half *>(grad.data));
  default:
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": the gradient must be f32, bf16 or f16");
  }
}

Status sgdUpdate(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(requireF32Except(call, {1}, {}));
  const TensorView &param = call.inputs[0], &grad = call.inputs[1];
  const int64_t n = param.numElements();
  const double momentum = call.floatParam(contract::Param::kMomentum, 0);
  if (grad.numElements() != n || (momentum != 0 && call.inputs.size() < 4))
    return FSDPC_ERROR(kInvalidArgument, "sgd_update: operands do not fit the parameter shard");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  Schedule schedule;
  FSDPC_RETURN_IF_ERROR(scheduleOf(call, schedule));
  float *buf = momentum != 0 ? call.inputs[2].f32() : nullptr;
  return withGradientType(call, grad, [&](auto g) -> Status {
    launchKernel(sgdKernel<std::remove_cv_t<std::remove_pointer_t<decltype(g)>>>, blocksFor(n, launch), kThreads, 0,
                 launch.stream, param.f32(), g, buf, static_cast<const long long *>(call.inputs.back().data), n,
                 schedule, momentum, call.floatParam(contract::Param::kDampening, 0),
                 call.floatParam(contract::Param::kWeightDecay, 0), call.intParam(contract::Param::kNesterov, 0) != 0);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
    return Status::ok();
  });
}

Status adamwUpdate(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(requireF32Except(call, {1}, {}));
  const int64_t n = call.inputs[0].numElements();
  for (int i = 1; i < 4; ++i)
    if (call.inputs[i].numElements() != n)
      return FSDPC_ERROR(kInvalidArgument, "adamw_update: operands do not fit the parameter shard");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  Schedule schedule;
  FSDPC_RETURN_IF_ERROR(scheduleOf(call, schedule));
  const bool vector = vectorAligned({&call.inputs[0], &call.inputs[1], &call.inputs[2], &call.inputs[3]});
  return withGradientType(call, call.inputs[1], [&](auto g) -> Status {
    using G = std::remove_cv_t<std::remove_pointer_t<decltype(g)>>;
    launchKernel(vector ? adamwKernel<true, G> : adamwKernel<false, G>, blocksFor(vector ? n / 4 + 1 : n, launch),
                 kThreads, 0, launch.stream, call.inputs[0].f32(), g, call.inputs[2].f32(), call.inputs[3].f32(),
                 static_cast<const long long *>(call.inputs[4].data), n, schedule,
                 call.floatParam(contract::Param::kBeta1, 0.9), call.floatParam(contract::Param::kBeta2, 0.999),
                 call.floatParam(contract::Param::kEps, 1e-8), call.floatParam(contract::Param::kWeightDecay, 0.01));
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
    return Status::ok();
  });
}

} // namespace fsdpc::runtime::cuda
