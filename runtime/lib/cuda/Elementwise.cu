//===- Elementwise.cu - elementwise kernels on the GPU --------------------===//
//
// One grid-stride kernel per op family, on operands of any float dtype
// (loaded as f32, stored rounded to nearest even): a warp-uniform branch on
// the dtype costs nothing next to the memory traffic of these kernels.
// Where every operand is read at the output's index and 16-byte aligned,
// a thread moves 8 elements per access (loadVector): a bf16 element at a
// time leaves HBM idle between loads.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"
#include "KernelVariants.h"
#include "../KernelChecks.h"
#include "fsdpc/runtime/HostDevice.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace fsdpc::runtime::cuda {

namespace {

enum class Binary { kAdd, kSub, kMul, kDiv, kPow };

template <Binary Op> __device__ __forceinline__ float applyBinary(float a, float b) {
  if constexpr (Op == Binary::kAdd)
    return a + b;
  else if constexpr (Op == Binary::kSub)
    return a - b;
  else if constexpr (Op == Binary::kMul)
    return a * b;
  else if constexpr (Op == Binary::kDiv)
    return a / b;
  else // small integer exponents as products, as torch and the CPU kernel do
    return b == 2.0f ? a * a : b == 3.0f ? a * a * a : b == 1.0f ? a : powf(a, b);
}

/// How an operand of a broadcasting op is read: at the output's index, as a
/// scalar, or through the layout's strides.
enum Access : int { kSameIndex = 0, kScalar = 1, kStrided = 2 };

inline int accessOf(const TensorView &v, int64_t n) {
  return v.numElements() == n ? kSameIndex : v.numElements() == 1 ? kScalar : kStrided;
}

/// Where output element i reads each operand of a broadcasting binary op.
__device__ __forceinline__ void binaryOperandOffsets(long long i, int accessA, int accessB, const Layout<2> &layout,
                                                     long long &ia, long long &ib) {
  long long offsets[2] = {i, i};
  if (accessA == kStrided || accessB == kStrided)
    layout.offsets(i, offsets);
  ia = accessA == kSameIndex ? i : accessA == kScalar ? 0 : offsets[0];
  ib = accessB == kSameIndex ? i : accessB == kScalar ? 0 : offsets[1];
}

template <Binary Op>
__global__ void binaryKernel(Operand a, Operand b, Operand out, long long n, int accessA, int accessB, Layout<2> layout) {
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    long long ia, ib;
    binaryOperandOffsets(i, accessA, accessB, layout, ia, ib);
    storeFloat(out, i, applyBinary<Op>(loadFloat(a, ia), loadFloat(b, ib)));
  }
}

/// binaryKernel on i64 tensors (token ids, positions), by the rules the CPU
/// kernel shares (integerArithmetic); a few elements per step, so one
/// simple kernel.
__global__ void integerBinaryKernel(IntegerArithmetic op, Operand a, Operand b, Operand out, long long n,
                                    int accessA, int accessB, Layout<2> layout) {
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    long long ia, ib;
    binaryOperandOffsets(i, accessA, accessB, layout, ia, ib);
    storeInteger(out, i, integerArithmetic(op, loadInteger(a, ia), loadInteger(b, ib)));
  }
}

/// Operand `o`'s 8 elements for the output's vector at `offset` (the
/// output's index where sameIndex, else its layout offset), read as
/// `access` says: a scalar repeated, or 8 contiguous elements.
__device__ __forceinline__ void loadBroadcastVector(Operand o, int access, long long offset,
                                                    float (&v)[kVectorElements]) {
  if (access == kScalar) {
    const float value = loadFloat(o, 0);
#pragma unroll
    for (int k = 0; k < kVectorElements; ++k)
      v[k] = value;
  } else {
    loadVector(o, offset, v);
  }
}

/// binaryKernel 8 elements at a time, where the output's last dimension is
/// a multiple of 8 and no operand is broadcast along it (broadcastVectors):
/// then the output's 8 elements of a vector come from 8 contiguous
/// elements of each strided operand, at an offset that is a multiple of 8.
/// A mask added over heads and queries, rotary embeddings' cos and sin
/// multiplied over heads, a scalar: one index computation per vector, not
/// per element, and 16-byte accesses. The same operation per element, so
/// the same bits as binaryKernel.
template <Binary Op>
__global__ void broadcastVectorKernel(Operand a, Operand b, Operand out, long long n, int accessA, int accessB,
                                      Layout<2> layout) {
  FSDPC_GRID_STRIDE_LOOP(j, n / kVectorElements) {
    const long long i = j * kVectorElements;
    long long offsets[2] = {i, i};
    if (accessA == kStrided || accessB == kStrided)
      layout.offsets(i, offsets);
    float x[kVectorElements], y[kVectorElements];
    loadBroadcastVector(a, accessA, accessA == kSameIndex ? i : offsets[0], x);
    loadBroadcastVector(b, accessB, accessB == kSameIndex ? i : offsets[1], y);
#pragma unroll
    for (int k = 0; k < kVectorElements; ++k)
      x[k] = applyBinary<Op>(x[k], y[k]);
    storeVector(out, i, x);
  }
}

/// Whether a broadcasting binary call takes broadcastVectorKernel: the
/// output's last dimension a multiple of 8, every operand a scalar or not
/// broadcast along that dimension (its last stride 1, so its other strides
/// are multiples of the dimension), and the operands read as vectors
/// 16-byte aligned.
bool broadcastVectors(const KernelCall &call, const Layout<2> &layout) {
  const TensorView &out = call.outputs[0];
  if (out.shape.empty() || out.shape.back() % kVectorElements != 0 ||
      reinterpret_cast<uintptr_t>(out.data) % 16 != 0)
    return false;
  const int64_t n = out.numElements();
  for (int j = 0; j < 2; ++j) {
    const TensorView &in = call.inputs[j];
    const int access = accessOf(in, n);
    if (access == kScalar)
      continue;
    if ((access == kStrided && layout.strides[j][layout.rank - 1] != 1) ||
        reinterpret_cast<uintptr_t>(in.data) % 16 != 0)
      return false;
  }
  return true;
}

/// out[i] = apply(a[i], b[i]) (b unread for one-input ops) for every i, 8
/// elements per thread in 16-byte accesses (vectorAligned operands); the
/// first threads of the grid take the last n % 8, one each. A residual add
/// or gradient sum, GELU and its gradient, a mixed-precision cast.
/// A thread loads Vectors vectors (a grid's width apart, so that a warp's
/// accesses stay contiguous) before it stores any: with one, each thread
/// has one load in flight at a time (its store may alias its next load),
/// which may leave HBM waiting. Every element gets the same operations
/// either way, so the variants (kVectorsPerTurn) give the same bits.
template <typename Apply, int Vectors>
__global__ void sameIndexVectorKernel(Apply apply, Operand a, Operand b, Operand out, long long n) {
  const long long vectors = n / kVectorElements, threads = static_cast<long long>(blockDim.x) * gridDim.x;
  for (long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; first < vectors;
       first += Vectors * threads) {
    float x[Vectors][kVectorElements], y[Vectors][kVectorElements] = {};
#pragma unroll
    for (int u = 0; u < Vectors; ++u) {
      const long long j = first + u * threads;
      if (j < vectors) {
        loadVector(a, j * kVectorElements, x[u]);
        if constexpr (Apply::kInputs == 2)
          loadVector(b, j * kVectorElements, y[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < Vectors; ++u) {
      const long long j = first + u * threads;
      if (j < vectors) {
#pragma unroll
        for (int k = 0; k < kVectorElements; ++k)
          x[u][k] = apply(x[u][k], y[u][k]);
        storeVector(out, j * kVectorElements, x[u]);
      }
    }
  }
  const long long i = vectors * kVectorElements + static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    storeFloat(out, i, apply(loadFloat(a, i), Apply::kInputs == 2 ? loadFloat(b, i) : 0.0f));
}

/// The variants of sameIndexVectorKernel: vectors a thread loads at a time.
/// More loads in flight per thread, fewer threads per multiprocessor (ptxas
/// for sm_90, gelu_grad: 48, 64 and 96 registers a thread).
constexpr int kVectorsPerTurn[] = {1, 2, 4};

/// Whether every operand and result of the call has the first output's
/// elements and starts 16-byte aligned: the calls of an elementwise op that
/// take sameIndexVectorKernel (a cast also needs float dtypes on both
/// sides), or gatedGradKernel's 8 elements a thread.
bool sameIndexVectorCall(const KernelCall &call) {
  const int64_t n = call.outputs[0].numElements();
  auto fits = [n](const TensorView &view) {
    return view.numElements() == n && reinterpret_cast<uintptr_t>(view.data) % 16 == 0;
  };
  return n > 0 && std::all_of(call.inputs.begin(), call.inputs.end(), fits) &&
         std::all_of(call.outputs.begin(), call.outputs.end(), fits);
}

bool castTakesVectors(const KernelCall &call) {
  const plan::DType from = call.inputs[0].dtype, to = call.outputs[0].dtype;
  return sameIndexVectorCall(call) && !call.intParam(contract::Param::kToBool, 0) && isFloatDtype(from) &&
         isFloatDtype(to) && from != to;
}

template <typename Apply, int Vectors>
KernelVariant sameIndexVectorVariant(const CudaLaunch &launch, Apply apply, Operand a, Operand b, Operand out,
                                     int64_t n) {
  const std::string name = Vectors == 1 ? "1 vector a thread at a time"
                                        : std::to_string(Vectors) + " vectors a thread at a time";
  // Threads for the vectors and for the n % 8 elements after them.
  const unsigned blocks = blocksFor((n / kVectorElements + Vectors - 1) / Vectors + 1, launch);
  const cudaStream_t stream = launch.stream;
  return {name, [=]() -> Status {
            launchKernel(sameIndexVectorKernel<Apply, Vectors>, blocks, kThreads, 0, stream, apply, a, b, out, n);
            FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
            return Status::ok();
          }};
}

/// Whether the variants of sameIndexVectorKernel differ for n elements:
/// with fewer vectors than the widest grid (blocksFor) has threads, one
/// turn of the loop covers them in each, and the timing is not worth its
/// note (a parameter's cast, a bias).
bool vectorVariantsMatter(const CudaLaunch &launch, int64_t n) {
  return n / kVectorElements >= static_cast<int64_t>(blocksFor(n, launch)) * kThreads;
}

/// Runs sameIndexVectorKernel over n elements, in the variant that is
/// fastest for the call's op, size and dtypes.
template <typename Apply>
Status launchSameIndexVector(const KernelCall &call, Apply apply, Operand a, Operand b, Operand out, int64_t n) {
  static_assert(std::size(kVectorsPerTurn) == 3 && kVectorsPerTurn[1] == 2 && kVectorsPerTurn[2] == 4);
  const CudaLaunch &launch = launchOf(call);
  if (!vectorVariantsMatter(launch, n))
    return sameIndexVectorVariant<Apply, 1>(launch, apply, a, b, out, n).launch();
  std::string shape = call.instruction->op() + " (" + std::to_string(n) + " elements:";
  for (const TensorView &in : call.inputs)
    shape += " " + dtypeName(in.dtype);
  shape += " -> " + dtypeName(call.outputs[0].dtype) + ")";
  return runFastestVariant(call, shape,
                           {sameIndexVectorVariant<Apply, 1>(launch, apply, a, b, out, n),
                            sameIndexVectorVariant<Apply, 2>(launch, apply, a, b, out, n),
                            sameIndexVectorVariant<Apply, 4>(launch, apply, a, b, out, n)});
}

template <Binary Op> struct ApplyBinary {
  static constexpr int kInputs = 2;
  __device__ float operator()(float x, float y) const { return applyBinary<Op>(x, y); }
};

template <Binary Op> Status binary(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &out = call.outputs[0];
  if (!cpu::broadcastsTo(a.shape, out.shape) || !cpu::broadcastsTo(b.shape, out.shape))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": shapes ", cpu::shapeString(a.shape), " and ",
                       cpu::shapeString(b.shape), " do not broadcast to ", cpu::shapeString(out.shape));
  const int64_t n = out.numElements();
  if (n == 0)
    return Status::ok();
  Layout<2> layout;
  if (!makeLayout(out.shape, {cpu::broadcastStrides(a.shape, out.shape), cpu::broadcastStrides(b.shape, out.shape)},
                  layout))
    return rankError(call, out.shape.size());
  const CudaLaunch &launch = launchOf(call);
  // Integer operands (i64, or the i32 and bool that plans may store) are
  // computed in i64.
  const bool integers = !isFloatDtype(a.dtype) && !isFloatDtype(b.dtype) && !isFloatDtype(out.dtype);
  if (!integers && (!isFloatDtype(a.dtype) || !isFloatDtype(b.dtype) || !isFloatDtype(out.dtype)))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": takes float tensors or integer ones, not both");
  if (integers && Op == Binary::kPow)
    return FSDPC_ERROR(kInvalidArgument, "pow: takes float tensors");
  if (integers) {
    constexpr IntegerArithmetic kInteger = Op == Binary::kAdd   ? IntegerArithmetic::kAdd
                                           : Op == Binary::kSub ? IntegerArithmetic::kSub
                                           : Op == Binary::kMul ? IntegerArithmetic::kMul
                                                                : IntegerArithmetic::kDiv;
    launchKernel(integerBinaryKernel, blocksFor(n, launch), kThreads, 0, launch.stream, kInteger, operandOf(a),
                 operandOf(b), operandOf(out), n, accessOf(a, n), accessOf(b, n), layout);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
    return Status::ok();
  }
  if (sameIndexVectorCall(call))
    return launchSameIndexVector(call, ApplyBinary<Op>{}, operandOf(a), operandOf(b), operandOf(out), n);
  if (broadcastVectors(call, layout))
    launchKernel(broadcastVectorKernel<Op>, blocksFor(n / kVectorElements, launch), kThreads, 0, launch.stream,
                 operandOf(a), operandOf(b), operandOf(out), n, accessOf(a, n), accessOf(b, n), layout);
  else
    launchKernel(binaryKernel<Op>, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(a), operandOf(b),
                 operandOf(out), n, accessOf(a, n), accessOf(b, n), layout);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

enum class Unary {
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kErf,
  kReciprocal,
  kSin,
  kCos,
  kAtan,
  kFloor,
  kCeil,
  kRound,
  kScale,
  kRelu,
  kTanh,
  kSigmoid,
  kGelu,
  kGeluTanh
};

constexpr float kSqrtTwoOverPi = 0.79788456080286536f;
constexpr float kInvSqrtTwoPi = 0.39894228040143268f;
constexpr float kInvSqrtTwo = 0.70710678118654752f;
constexpr float kGeluCubic = 0.044715f;

template <Unary Op> __device__ __forceinline__ float applyUnary(float x, float factor) {
  if constexpr (Op == Unary::kNeg)
    return -x;
  else if constexpr (Op == Unary::kExp)
    return expf(x);
  else if constexpr (Op == Unary::kLog)
    return logf(x);
  else if constexpr (Op == Unary::kSqrt)
    return sqrtf(x);
  else if constexpr (Op == Unary::kErf)
    return erff(x);
  else if constexpr (Op == Unary::kReciprocal)
    return 1.0f / x;
  else if constexpr (Op == Unary::kSin)
    return sinf(x); // not __sinf: rotary angles reach the thousands, where it loses digits
  else if constexpr (Op == Unary::kCos)
    return cosf(x);
  else if constexpr (Op == Unary::kAtan)
    return atanf(x);
  else if constexpr (Op == Unary::kFloor)
    return floorf(x);
  else if constexpr (Op == Unary::kCeil)
    return ceilf(x);
  else if constexpr (Op == Unary::kRound)
    return rintf(x); // halves to even, as ONNX and torch
  else if constexpr (Op == Unary::kScale)
    return x * factor;
  else if constexpr (Op == Unary::kRelu)
    return x <= 0.0f ? 0.0f : x; // NaN stays NaN, as in torch
  else if constexpr (Op == Unary::kTanh)
    return tanhf(x);
  else if constexpr (Op == Unary::kSigmoid)
    return 1.0f / (1.0f + expf(-x));
  else if constexpr (Op == Unary::kGelu)
    return 0.5f * x * (1.0f + erff(x * kInvSqrtTwo));
  else
    return 0.5f * x * (1.0f + tanhf(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x)));
}

template <Unary Op> __global__ void unaryKernel(Operand in, Operand out, long long n, float factor) {
  FSDPC_GRID_STRIDE_LOOP(i, n) { storeFloat(out, i, applyUnary<Op>(loadFloat(in, i), factor)); }
}

template <Unary Op> struct ApplyUnary {
  static constexpr int kInputs = 1;
  float factor;
  __device__ float operator()(float x, float) const { return applyUnary<Op>(x, factor); }
};

template <Unary Op> Status unary(const KernelCall &call, float factor = 1.0f) {
  const TensorView &in = call.inputs[0], &out = call.outputs[0];
  const int64_t n = out.numElements();
  if (in.numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": input and output sizes differ");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  if (sameIndexVectorCall(call))
    return launchSameIndexVector(call, ApplyUnary<Op>{factor}, operandOf(in), Operand{}, operandOf(out), n);
  launchKernel(unaryKernel<Op>, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(in), operandOf(out), n,
               factor);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

/// Gradients from (y, dy) for relu, tanh and sigmoid; from (x, dy) for GELU.
enum class UnaryGrad { kRelu, kTanh, kSigmoid, kGelu, kGeluTanh };

template <UnaryGrad Op> __device__ __forceinline__ float applyUnaryGrad(float y, float dy) {
  if constexpr (Op == UnaryGrad::kRelu)
    return y <= 0.0f ? 0.0f : dy;
  else if constexpr (Op == UnaryGrad::kTanh)
    return dy * (1.0f - y * y);
  else if constexpr (Op == UnaryGrad::kSigmoid)
    return dy * (y * (1.0f - y));
  else if constexpr (Op == UnaryGrad::kGelu) {
    const float x = y;
    return dy * (0.5f * (1.0f + erff(x * kInvSqrtTwo)) + x * kInvSqrtTwoPi * expf(-0.5f * x * x));
  } else {
    const float x = y;
    const float t = tanhf(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x));
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrtTwoOverPi * (1.0f + 3.0f * kGeluCubic * x * x));
  }
}

template <UnaryGrad Op> __global__ void unaryGradKernel(Operand y, Operand dy, Operand out, long long n) {
  FSDPC_GRID_STRIDE_LOOP(i, n) { storeFloat(out, i, applyUnaryGrad<Op>(loadFloat(y, i), loadFloat(dy, i))); }
}

template <UnaryGrad Op> struct ApplyUnaryGrad {
  static constexpr int kInputs = 2;
  __device__ float operator()(float x, float dy) const { return applyUnaryGrad<Op>(x, dy); }
};

template <UnaryGrad Op> Status unaryGrad(const KernelCall &call) {
  const TensorView &y = call.inputs[0], &dy = call.inputs[1], &out = call.outputs[0];
  const int64_t n = out.numElements();
  if (y.numElements() != n || dy.numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": operand sizes differ");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  if (sameIndexVectorCall(call))
    return launchSameIndexVector(call, ApplyUnaryGrad<Op>{}, operandOf(y), operandOf(dy), operandOf(out), n);
  launchKernel(unaryGradKernel<Op>, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(y), operandOf(dy),
               operandOf(out), n);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

/// gated_activation: act(gate) * up, the activation as sigmoid's and
/// gelu's kernels compute it (silu: gate * sigmoid(gate)).
template <GatedActivation Kind> __device__ __forceinline__ float gatedOf(float gate, float up) {
  if constexpr (Kind == GatedActivation::kSilu)
    return gate * applyUnary<Unary::kSigmoid>(gate, 1.0f) * up;
  else if constexpr (Kind == GatedActivation::kGelu)
    return applyUnary<Unary::kGelu>(gate, 1.0f) * up;
  else
    return applyUnary<Unary::kGeluTanh>(gate, 1.0f) * up;
}

/// gated_activation_grad's two gradients, in the order of the export's
/// unfused ops (the CPU kernel's): da = dy * up; silu: dgate = da * s +
/// (da * gate) * (s * (1 - s)), dup = dy * (gate * s); GELU: dgate =
/// gelu_grad(gate, da), dup = dy * gelu(gate).
template <GatedActivation Kind>
__device__ __forceinline__ void gatedGradOf(float gate, float up, float dy, float &dgate, float &dup) {
  const float da = dy * up;
  if constexpr (Kind == GatedActivation::kSilu) {
    const float s = applyUnary<Unary::kSigmoid>(gate, 1.0f);
    dup = dy * (gate * s);
    dgate = da * s + applyUnaryGrad<UnaryGrad::kSigmoid>(s, da * gate);
  } else {
    constexpr bool tanhForm = Kind == GatedActivation::kGeluTanh;
    dup = dy * applyUnary<(tanhForm ? Unary::kGeluTanh : Unary::kGelu)>(gate, 1.0f);
    dgate = applyUnaryGrad<(tanhForm ? UnaryGrad::kGeluTanh : UnaryGrad::kGelu)>(gate, da);
  }
}

template <GatedActivation Kind> struct ApplyGated {
  static constexpr int kInputs = 2;
  __device__ float operator()(float gate, float up) const { return gatedOf<Kind>(gate, up); }
};

template <GatedActivation Kind> __global__ void gatedKernel(Operand gate, Operand up, Operand out, long long n) {
  FSDPC_GRID_STRIDE_LOOP(i, n) { storeFloat(out, i, gatedOf<Kind>(loadFloat(gate, i), loadFloat(up, i))); }
}

/// Both gradients, 8 elements a thread in 16-byte accesses where every
/// operand allows (Vector), else one.
template <GatedActivation Kind, bool Vector>
__global__ void gatedGradKernel(Operand gate, Operand up, Operand dy, Operand dgate, Operand dup, long long n) {
  const long long vectors = Vector ? n / kVectorElements : 0;
  if constexpr (Vector) {
    FSDPC_GRID_STRIDE_LOOP(j, vectors) {
      float g[kVectorElements], u[kVectorElements], d[kVectorElements], dg[kVectorElements], du[kVectorElements];
      loadVector(gate, j * kVectorElements, g);
      loadVector(up, j * kVectorElements, u);
      loadVector(dy, j * kVectorElements, d);
#pragma unroll
      for (int k = 0; k < kVectorElements; ++k)
        gatedGradOf<Kind>(g[k], u[k], d[k], dg[k], du[k]);
      storeVector(dgate, j * kVectorElements, dg);
      storeVector(dup, j * kVectorElements, du);
    }
  }
  FSDPC_GRID_STRIDE_LOOP(t, n - vectors * kVectorElements) {
    const long long i = vectors * kVectorElements + t;
    float dg, du;
    gatedGradOf<Kind>(loadFloat(gate, i), loadFloat(up, i), loadFloat(dy, i), dg, du);
    storeFloat(dgate, i, dg);
    storeFloat(dup, i, du);
  }
}

template <GatedActivation Kind> Status gatedActivationAs(const KernelCall &call) {
  const TensorView &gate = call.inputs[0], &up = call.inputs[1], &out = call.outputs[0];
  const int64_t n = out.numElements();
  if (gate.numElements() != n || up.numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": operand sizes differ");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  if (sameIndexVectorCall(call))
    return launchSameIndexVector(call, ApplyGated<Kind>{}, operandOf(gate), operandOf(up), operandOf(out), n);
  launchKernel(gatedKernel<Kind>, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(gate), operandOf(up),
               operandOf(out), n);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

template <GatedActivation Kind> Status gatedActivationGradAs(const KernelCall &call) {
  const int64_t n = call.outputs[0].numElements();
  for (const TensorView &view : call.inputs)
    if (view.numElements() != n)
      return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": operand sizes differ");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  const Operand gate = operandOf(call.inputs[0]), up = operandOf(call.inputs[1]), dy = operandOf(call.inputs[2]),
                dgate = operandOf(call.outputs[0]), dup = operandOf(call.outputs[1]);
  if (sameIndexVectorCall(call))
    launchKernel(gatedGradKernel<Kind, true>, blocksFor(n / kVectorElements + 1, launch), kThreads, 0, launch.stream,
                 gate, up, dy, dgate, dup, n);
  else
    launchKernel(gatedGradKernel<Kind, false>, blocksFor(n, launch), kThreads, 0, launch.stream, gate, up, dy, dgate,
                 dup, n);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

__global__ void selectKernel(Operand c, Operand a, Operand b, Operand out, long long n, Layout<3> layout) {
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    long long offsets[3];
    layout.offsets(i, offsets);
    storeFloat(out, i, loadInteger(c, offsets[0]) ? loadFloat(a, offsets[1]) : loadFloat(b, offsets[2]));
  }
}

__global__ void compareKernel(Operand a, Operand b, Operand out, long long n, Layout<2> layout, Comparison comparison) {
  const bool floats = isFloatDtype(a.dtype);
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    long long offsets[2];
    layout.offsets(i, offsets);
    const bool holds = floats ? compareHolds(comparison, loadFloat(a, offsets[0]), loadFloat(b, offsets[1]))
                              : compareHolds(comparison, loadInteger(a, offsets[0]), loadInteger(b, offsets[1]));
    storeInteger(out, i, holds ? 1 : 0);
  }
}

__global__ void isNanKernel(Operand in, Operand out, long long n) {
  FSDPC_GRID_STRIDE_LOOP(i, n) { storeInteger(out, i, isnan(loadFloat(in, i)) ? 1 : 0); }
}

/// A float-to-float cast, 8 elements per thread.
struct ApplyCopy {
  static constexpr int kInputs = 1;
  __device__ float operator()(float x, float) const { return x; }
};

__global__ void castKernel(Operand in, Operand out, long long n, bool toBool) {
  const bool floatIn = isFloatDtype(in.dtype), floatOut = isFloatDtype(out.dtype);
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    if (toBool)
      storeInteger(out, i, loadInteger(in, i) != 0);
    else if (floatIn && floatOut)
      storeFloat(out, i, loadFloat(in, i));
    else if (floatIn) // float to integer truncates, as the CPU kernel does
      storeInteger(out, i, truncateToInt64(loadFloat(in, i)));
    else if (floatOut)
      storeFloat(out, i, static_cast<float>(loadInteger(in, i)));
    else
      storeInteger(out, i, loadInteger(in, i));
  }
}

/// The CPU kernel's keep decision (Elementwise.cpp), bit for bit: a
/// counter-based hash of (seed, step, rank, index).
__device__ __forceinline__ bool keepElement(unsigned long long seed, long long step, int rank, long long index,
                                            double ratio) {
  unsigned long long x = seed ^ (static_cast<unsigned long long>(step) * 0x9E3779B97F4A7C15ull) ^
                         (static_cast<unsigned long long>(rank) * 0xC2B2AE3D27D4EB4Full) ^
                         static_cast<unsigned long long>(index);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0) >= ratio;
}

__global__ void dropoutKernel(Operand in, Operand out, long long n, unsigned long long seed,
                              const StepContext *context, double ratio, float scale) {
  const long long step = context->step;
  const int rank = context->rank;
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    storeFloat(out, i, keepElement(seed, step, rank, i, ratio) ? loadFloat(in, i) * scale : 0.0f);
  }
}

__global__ void fillKernel(Operand out, long long n, float value) {
  const bool isFloat = isFloatDtype(out.dtype);
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    if (isFloat)
      storeFloat(out, i, value);
    else
      storeInteger(out, i, truncateToInt64(value));
  }
}

/// One element pair (j, j + h) of a rotary row, h = D / 2 (or (2j, 2j + 1)
/// interleaved): the CPU kernel's formulas (cpu/Elementwise.cpp), each
/// product rounded before the sum (__fmul_rn keeps nvcc from contracting
/// them into an FMA), so that the bits equal the CPU kernel's and torch's
/// unfused ops'.
template <bool Forward>
__device__ __forceinline__ void rotatePair(float first, float second, float cosFirst, float cosSecond, float sinFirst,
                                           float sinSecond, float &outFirst, float &outSecond) {
  if constexpr (Forward) {
    outFirst = __fadd_rn(__fmul_rn(first, cosFirst), __fmul_rn(-second, sinFirst));
    outSecond = __fadd_rn(__fmul_rn(second, cosSecond), __fmul_rn(first, sinSecond));
  } else {
    outFirst = __fadd_rn(__fmul_rn(first, cosFirst), __fmul_rn(second, sinSecond));
    outSecond = __fadd_rn(__fmul_rn(second, cosSecond), __fmul_rn(-first, sinFirst));
  }
}

/// rotary / rotary_grad, a thread per element pair of a row: pair p's
/// elements lie `apart` = h (halves) or 1 (interleaved) apart, its first at
/// (p / apart) 2 apart + p % apart. The layout gives cos's and sin's
/// offsets of the first element (their last stride is 1, so the second is
/// `apart` further).
template <bool Forward>
__global__ void rotaryKernel(Operand x, Operand cosTable, Operand sinTable, Operand out, long long pairs,
                             long long apart, Layout<2> layout) {
  FSDPC_GRID_STRIDE_LOOP(p, pairs) {
    const long long first = (p / apart) * 2 * apart + p % apart, second = first + apart;
    long long offsets[2];
    layout.offsets(first, offsets);
    float a, b;
    rotatePair<Forward>(loadFloat(x, first), loadFloat(x, second), loadFloat(cosTable, offsets[0]),
                        loadFloat(cosTable, offsets[0] + apart), loadFloat(sinTable, offsets[1]),
                        loadFloat(sinTable, offsets[1] + apart), a, b);
    storeFloat(out, first, a);
    storeFloat(out, second, b);
  }
}

/// rotaryKernel 8 pairs a thread, where h is a multiple of 8 and every
/// operand is 16-byte aligned: six 16-byte loads and two stores of bf16
/// (LLaMA's head dimension 128 gives h = 64) instead of 2-byte accesses.
template <bool Forward>
__global__ void rotaryVectorKernel(Operand x, Operand cosTable, Operand sinTable, Operand out, long long pairs,
                                   long long half, Layout<2> layout) {
  FSDPC_GRID_STRIDE_LOOP(v, pairs / kVectorElements) {
    const long long p = v * kVectorElements;
    const long long first = (p / half) * 2 * half + p % half, second = first + half;
    long long offsets[2];
    layout.offsets(first, offsets);
    float xa[kVectorElements], xb[kVectorElements], ca[kVectorElements], cb[kVectorElements], sa[kVectorElements],
        sb[kVectorElements];
    loadVector(x, first, xa);
    loadVector(x, second, xb);
    loadVector(cosTable, offsets[0], ca);
    loadVector(cosTable, offsets[0] + half, cb);
    loadVector(sinTable, offsets[1], sa);
    loadVector(sinTable, offsets[1] + half, sb);
#pragma unroll
    for (int k = 0; k < kVectorElements; ++k)
      rotatePair<Forward>(xa[k], xb[k], ca[k], cb[k], sa[k], sb[k], xa[k], xb[k]);
    storeVector(out, first, xa);
    storeVector(out, second, xb);
  }
}

/// The interleaved rotation 4 pairs a thread, where D is a multiple of 8
/// and every operand is 16-byte aligned: three 16-byte loads (x, cos, sin)
/// and one store of bf16 hold 4 adjacent pairs.
template <bool Forward>
__global__ void rotaryInterleavedVectorKernel(Operand x, Operand cosTable, Operand sinTable, Operand out,
                                              long long vectors, Layout<2> layout) {
  FSDPC_GRID_STRIDE_LOOP(v, vectors) {
    const long long first = v * kVectorElements;
    long long offsets[2];
    layout.offsets(first, offsets);
    float xs[kVectorElements], cs[kVectorElements], ss[kVectorElements];
    loadVector(x, first, xs);
    loadVector(cosTable, offsets[0], cs);
    loadVector(sinTable, offsets[1], ss);
#pragma unroll
    for (int k = 0; k < kVectorElements; k += 2)
      rotatePair<Forward>(xs[k], xs[k + 1], cs[k], cs[k + 1], ss[k], ss[k + 1], xs[k], xs[k + 1]);
    storeVector(out, first, xs);
  }
}

template <bool Forward> Status rotate(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &cosTable = call.inputs[1], &sinTable = call.inputs[2], &out = call.outputs[0];
  const int64_t pairs = x.numElements() / 2, half = x.shape.back() / 2;
  const bool interleaved = call.intParam(contract::Param::kInterleaved, 0) != 0;
  if (pairs == 0)
    return Status::ok();
  Layout<2> layout;
  if (!makeLayout(x.shape,
                  {cpu::broadcastStrides(cosTable.shape, x.shape), cpu::broadcastStrides(sinTable.shape, x.shape)},
                  layout))
    return rankError(call, x.shape.size());
  const CudaLaunch &launch = launchOf(call);
  const bool vectors = vectorAligned({&x, &cosTable, &sinTable, &out});
  if (interleaved && vectors && (2 * half) % kVectorElements == 0)
    launchKernel(rotaryInterleavedVectorKernel<Forward>, blocksFor(2 * pairs / kVectorElements, launch), kThreads, 0,
                 launch.stream, operandOf(x), operandOf(cosTable), operandOf(sinTable), operandOf(out),
                 2 * pairs / kVectorElements, layout);
  else if (!interleaved && vectors && half % kVectorElements == 0)
    launchKernel(rotaryVectorKernel<Forward>, blocksFor(pairs / kVectorElements, launch), kThreads, 0, launch.stream,
                 operandOf(x), operandOf(cosTable), operandOf(sinTable), operandOf(out), pairs, half, layout);
  else
    launchKernel(rotaryKernel<Forward>, blocksFor(pairs, launch), kThreads, 0, launch.stream, operandOf(x),
                 operandOf(cosTable), operandOf(sinTable), operandOf(out), pairs, interleaved ? 1 : half, layout);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

} // namespace

Status rotary(const KernelCall &c) { return rotate<true>(c); }
Status rotaryGrad(const KernelCall &c) { return rotate<false>(c); }

int elementwiseVariants(const KernelCall &call) {
  const bool variants =
      sameIndexVectorCall(call) && vectorVariantsMatter(launchOf(call), call.outputs[0].numElements());
  return variants ? static_cast<int>(std::size(kVectorsPerTurn)) : 1;
}
int castVariants(const KernelCall &call) {
  const bool variants = castTakesVectors(call) && vectorVariantsMatter(launchOf(call), call.outputs[0].numElements());
  return variants ? static_cast<int>(std::size(kVectorsPerTurn)) : 1;
}

Status add(const KernelCall &c) { return binary<Binary::kAdd>(c); }
Status sub(const KernelCall &c) { return binary<Binary::kSub>(c); }
Status mul(const KernelCall &c) { return binary<Binary::kMul>(c); }
Status div(const KernelCall &c) { return binary<Binary::kDiv>(c); }
Status power(const KernelCall &c) { return binary<Binary::kPow>(c); }

Status negate(const KernelCall &c) { return unary<Unary::kNeg>(c); }
Status exponential(const KernelCall &c) { return unary<Unary::kExp>(c); }
Status logarithm(const KernelCall &c) { return unary<Unary::kLog>(c); }
Status squareRoot(const KernelCall &c) { return unary<Unary::kSqrt>(c); }
Status errorFunction(const KernelCall &c) { return unary<Unary::kErf>(c); }
Status reciprocal(const KernelCall &c) { return unary<Unary::kReciprocal>(c); }
Status sine(const KernelCall &c) { return unary<Unary::kSin>(c); }
Status cosine(const KernelCall &c) { return unary<Unary::kCos>(c); }
Status arctangent(const KernelCall &c) { return unary<Unary::kAtan>(c); }
Status roundDown(const KernelCall &c) { return unary<Unary::kFloor>(c); }
Status roundUp(const KernelCall &c) { return unary<Unary::kCeil>(c); }
Status roundToNearestEven(const KernelCall &c) { return unary<Unary::kRound>(c); }
Status scale(const KernelCall &c) {
  return unary<Unary::kScale>(c, static_cast<float>(c.floatParam(contract::Param::kFactor, 1.0)));
}
Status relu(const KernelCall &c) { return unary<Unary::kRelu>(c); }
Status hyperbolicTangent(const KernelCall &c) { return unary<Unary::kTanh>(c); }
Status sigmoid(const KernelCall &c) { return unary<Unary::kSigmoid>(c); }
Status reluGrad(const KernelCall &c) { return unaryGrad<UnaryGrad::kRelu>(c); }
Status tanhGrad(const KernelCall &c) { return unaryGrad<UnaryGrad::kTanh>(c); }
Status sigmoidGrad(const KernelCall &c) { return unaryGrad<UnaryGrad::kSigmoid>(c); }

Status gelu(const KernelCall &c) {
  bool tanhForm = false;
  FSDPC_RETURN_IF_ERROR(geluTanhForm(c, tanhForm));
  return tanhForm ? unary<Unary::kGeluTanh>(c) : unary<Unary::kGelu>(c);
}
Status geluGrad(const KernelCall &c) {
  bool tanhForm = false;
  FSDPC_RETURN_IF_ERROR(geluTanhForm(c, tanhForm));
  return tanhForm ? unaryGrad<UnaryGrad::kGeluTanh>(c) : unaryGrad<UnaryGrad::kGelu>(c);
}

Status gatedActivation(const KernelCall &c) {
  return withGatedActivation(c, [&](auto kind) { return gatedActivationAs<decltype(kind)::value>(c); });
}
Status gatedActivationGrad(const KernelCall &c) {
  return withGatedActivation(c, [&](auto kind) { return gatedActivationGradAs<decltype(kind)::value>(c); });
}

Status select(const KernelCall &call) {
  const TensorView &c = call.inputs[0], &a = call.inputs[1], &b = call.inputs[2], &y = call.outputs[0];
  if (!cpu::broadcastsTo(c.shape, y.shape) || !cpu::broadcastsTo(a.shape, y.shape) ||
      !cpu::broadcastsTo(b.shape, y.shape))
    return FSDPC_ERROR(kInvalidArgument, "select: operands do not broadcast to ", cpu::shapeString(y.shape));
  const int64_t n = y.numElements();
  if (n == 0)
    return Status::ok();
  Layout<3> layout;
  if (!makeLayout(y.shape,
                  {cpu::broadcastStrides(c.shape, y.shape), cpu::broadcastStrides(a.shape, y.shape),
                   cpu::broadcastStrides(b.shape, y.shape)},
                  layout))
    return rankError(call, y.shape.size());
  const CudaLaunch &launch = launchOf(call);
  launchKernel(selectKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(c), operandOf(a), operandOf(b),
               operandOf(y), n, layout);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status isNan(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  const int64_t n = y.numElements();
  if (x.numElements() != n || !isFloatDtype(x.dtype) || y.dtype != plan::I64)
    return FSDPC_ERROR(kInvalidArgument, "is_nan: takes a float tensor to an i64 tensor of its size");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  launchKernel(isNanKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(x), operandOf(y), n);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status compare(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &y = call.outputs[0];
  Comparison comparison = Comparison::kEqual;
  FSDPC_RETURN_IF_ERROR(comparisonOf(call, comparison));
  if (isFloatDtype(a.dtype) != isFloatDtype(b.dtype) || y.dtype != plan::I64)
    return FSDPC_ERROR(kInvalidArgument, "compare: takes two float or two integer tensors to an i64 tensor");
  if (!cpu::broadcastsTo(a.shape, y.shape) || !cpu::broadcastsTo(b.shape, y.shape))
    return FSDPC_ERROR(kInvalidArgument, "compare: operands do not broadcast to ", cpu::shapeString(y.shape));
  const int64_t n = y.numElements();
  if (n == 0)
    return Status::ok();
  Layout<2> layout;
  if (!makeLayout(y.shape, {cpu::broadcastStrides(a.shape, y.shape), cpu::broadcastStrides(b.shape, y.shape)}, layout))
    return rankError(call, y.shape.size());
  const CudaLaunch &launch = launchOf(call);
  launchKernel(compareKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(a), operandOf(b),
               operandOf(y), n, layout, comparison);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status cast(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  const int64_t n = y.numElements();
  if (x.numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, "cast: input and output sizes differ");
  const bool toBool = call.intParam(contract::Param::kToBool, 0);
  if (toBool && (x.dtype != plan::I64 || y.dtype != plan::I64))
    return FSDPC_ERROR(kInvalidArgument, "cast: to_bool casts i64 to i64");
  const CudaLaunch &launch = launchOf(call);
  if (n == 0)
    return Status::ok();
  if (x.dtype == y.dtype && !toBool) {
    FSDPC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(y.data, x.data, n * dtypeSize(x.dtype), cudaMemcpyDeviceToDevice, launch.stream));
    return Status::ok();
  }
  if (castTakesVectors(call))
    return launchSameIndexVector(call, ApplyCopy{}, operandOf(x), Operand{}, operandOf(y), n);
  launchKernel(castKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(x), operandOf(y), n, toBool);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status dropout(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  const double ratio = call.floatParam(contract::Param::kRatio, 0.5);
  const auto seed = static_cast<unsigned long long>(call.intParam(contract::Param::kSeed, 0));
  const float scale = static_cast<float>(1.0 / (1.0 - ratio));
  const int64_t n = y.numElements();
  if (x.numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": input and output sizes differ");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  if (!launch.context)
    return FSDPC_ERROR(kInternal, call.instruction->op(), ": no step context on the device");
  launchKernel(dropoutKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(x), operandOf(y), n, seed,
               launch.context, ratio, scale);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status fill(const KernelCall &call) {
  const TensorView &y = call.outputs[0];
  const int64_t n = y.numElements();
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  launchKernel(fillKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(y), n,
               static_cast<float>(call.floatParam(contract::Param::kValue, 0.0)));
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

__global__ void nonfiniteKernel(Operand x, long long n, unsigned long long index, unsigned long long *first) {
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    if (!isfinite(loadFloat(x, i))) {
      atomicMin(first, index);
      return; // one report per thread is enough
    }
  }
}

Status noteNonfinite(const TensorView &output, const CudaLaunch &launch, unsigned long long *first) {
  const int64_t n = output.numElements();
  if (n == 0 || !isFloatDtype(output.dtype))
    return Status::ok();
  launchKernel(nonfiniteKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(output), n,
               static_cast<unsigned long long>(launch.instruction), first);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

} // namespace fsdpc::runtime::cuda
