//===- Elementwise.cpp - elementwise kernels --------------------------------===//
#include "CpuKernels.h"
#include "../KernelChecks.h"
#include "Indexing.h"
#include "VectorMath.h"
#include "fsdpc/runtime/Float16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdpc::runtime::cpu {

namespace {

/// out = op(a, b) with numpy broadcasting, on T elements (float or int64_t).
template <typename T, typename Op> Status binaryBroadcast(const KernelCall &call, Op op) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &out = call.outputs[0];
  if (!broadcastsTo(a.shape, out.shape) || !broadcastsTo(b.shape, out.shape))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": shapes ", shapeString(a.shape), " and ",
                       shapeString(b.shape), " do not broadcast to ", shapeString(out.shape));
  const T *pa = static_cast<const T *>(a.data), *pb = static_cast<const T *>(b.data);
  T *po = static_cast<T *>(out.data);
  int64_t n = out.numElements();
  if (a.numElements() == n && b.numElements() == n) {
#pragma omp parallel for if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i)
      po[i] = op(pa[i], pb[i]);
    return Status::ok();
  }
  if (a.numElements() == n && b.numElements() == 1) {
    T s = pb[0];
#pragma omp parallel for if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i)
      po[i] = op(pa[i], s);
    return Status::ok();
  }
  forEachBroadcast(out.shape, broadcastStrides(a.shape, out.shape), broadcastStrides(b.shape, out.shape),
                   [&](int64_t i, int64_t ia, int64_t ib) { po[i] = op(pa[ia], pb[ib]); });
  return Status::ok();
}

template <typename Op> Status unary(const KernelCall &call, Op op) {
  const float *in = call.inputs[0].f32();
  float *out = call.outputs[0].f32();
  int64_t n = call.outputs[0].numElements();
  if (call.inputs[0].numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": input and output sizes differ");
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    out[i] = op(in[i]);
  return Status::ok();
}

/// out = op(y, dy) elementwise: the shape of the gradient rules of unary ops.
template <typename Op> Status unaryGrad(const KernelCall &call, Op op) {
  const float *y = call.inputs[0].f32(), *dy = call.inputs[1].f32();
  float *out = call.outputs[0].f32();
  int64_t n = call.outputs[0].numElements();
  if (call.inputs[0].numElements() != n || call.inputs[1].numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": operand sizes differ");
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    out[i] = op(y[i], dy[i]);
  return Status::ok();
}

/// Arithmetic on f32 tensors, or on i64 ones by integerArithmetic's rules
/// (HostDevice.h), which the CUDA kernels share.
template <IntegerArithmetic Integer, typename FloatOp> Status arithmetic(const KernelCall &call, FloatOp op) {
  const plan::DType dtype = call.outputs[0].dtype;
  if (dtype == plan::I64 && call.inputs[0].dtype == plan::I64 && call.inputs[1].dtype == plan::I64)
    return binaryBroadcast<int64_t>(call, [](int64_t a, int64_t b) { return integerArithmetic(Integer, a, b); });
  if (dtype != plan::F32 || call.inputs[0].dtype != plan::F32 || call.inputs[1].dtype != plan::F32)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": takes f32 or i64 tensors, all of one dtype");
  return binaryBroadcast<float>(call, op);
}

} // namespace

Status add(const KernelCall &c) {
  return arithmetic<IntegerArithmetic::kAdd>(c, [](float a, float b) { return a + b; });
}
Status sub(const KernelCall &c) {
  return arithmetic<IntegerArithmetic::kSub>(c, [](float a, float b) { return a - b; });
}
Status mul(const KernelCall &c) {
  return arithmetic<IntegerArithmetic::kMul>(c, [](float a, float b) { return a * b; });
}
Status div(const KernelCall &c) {
  return arithmetic<IntegerArithmetic::kDiv>(c, [](float a, float b) { return a / b; });
}

Status power(const KernelCall &c) {
  if (c.inputs[0].dtype != plan::F32 || c.inputs[1].dtype != plan::F32 || c.outputs[0].dtype != plan::F32)
    return FSDPC_ERROR(kInvalidArgument, "pow: takes f32 tensors");
  // Small integer exponents (GELU's x^3, x^2 in norms) as products, as torch does.
  return binaryBroadcast<float>(c, [](float a, float b) {
    return b == 2.0f ? a * a : b == 3.0f ? a * a * a : b == 1.0f ? a : std::pow(a, b);
  });
}

Status negate(const KernelCall &c) { return unary(c, [](float x) { return -x; }); }
Status exponential(const KernelCall &c) { return unary(c, [](float x) { return std::exp(x); }); }
Status logarithm(const KernelCall &c) { return unary(c, [](float x) { return std::log(x); }); }
Status squareRoot(const KernelCall &c) { return unary(c, [](float x) { return std::sqrt(x); }); }
Status errorFunction(const KernelCall &c) { return unary(c, [](float x) { return std::erf(x); }); }
Status reciprocal(const KernelCall &c) { return unary(c, [](float x) { return 1.0f / x; }); }
Status sine(const KernelCall &c) { return unary(c, [](float x) { return std::sin(x); }); }
Status cosine(const KernelCall &c) { return unary(c, [](float x) { return std::cos(x); }); }
Status arctangent(const KernelCall &c) { return unary(c, [](float x) { return std::atan(x); }); }
Status roundDown(const KernelCall &c) { return unary(c, [](float x) { return std::floor(x); }); }
Status roundUp(const KernelCall &c) { return unary(c, [](float x) { return std::ceil(x); }); }
// ONNX's Round and torch.round take halves to the even neighbour: rint in
// the default rounding mode, which nothing in fsdpc changes.
Status roundToNearestEven(const KernelCall &c) { return unary(c, [](float x) { return std::nearbyint(x); }); }

Status scale(const KernelCall &c) {
  float factor = static_cast<float>(c.floatParam(contract::Param::kFactor, 1.0));
  return unary(c, [factor](float x) { return x * factor; });
}

// As torch: relu(NaN) is NaN, and its gradient passes where y is NaN (the
// test is y <= 0, which NaN fails), so a NaN is never silently zeroed.
Status relu(const KernelCall &c) { return unary(c, [](float x) { return x <= 0 ? 0.0f : x; }); }
Status hyperbolicTangent(const KernelCall &c) { return unary(c, [](float x) { return std::tanh(x); }); }
namespace {
float logistic(float x) { return 1.0f / (1.0f + std::exp(-x)); }
/// sigmoid's gradient from its output y, shared with gated_activation_grad.
float logisticGrad(float y, float dy) { return dy * (y * (1 - y)); }
} // namespace

Status sigmoid(const KernelCall &c) { return unary(c, logistic); }

Status reluGrad(const KernelCall &c) {
  return unaryGrad(c, [](float y, float dy) { return y <= 0 ? 0.0f : dy; });
}
Status tanhGrad(const KernelCall &c) {
  return unaryGrad(c, [](float y, float dy) { return dy * (1 - y * y); });
}
Status sigmoidGrad(const KernelCall &c) { return unaryGrad(c, logisticGrad); }

Status select(const KernelCall &call) {
  const TensorView &c = call.inputs[0], &a = call.inputs[1], &b = call.inputs[2], &y = call.outputs[0];
  if (!broadcastsTo(c.shape, y.shape) || !broadcastsTo(a.shape, y.shape) || !broadcastsTo(b.shape, y.shape))
    return FSDPC_ERROR(kInvalidArgument, "select: operands do not broadcast to ", shapeString(y.shape));
  forEachRow<3>(y.shape, {broadcastStrides(c.shape, y.shape), broadcastStrides(a.shape, y.shape),
                          broadcastStrides(b.shape, y.shape)},
                [&](int64_t row, const std::array<int64_t, 3> &o, int64_t count, const std::array<int64_t, 3> &st) {
                  float *out = y.f32() + row * count;
                  const int64_t *pc = c.i64() + o[0];
                  const float *pa = a.f32() + o[1], *pb = b.f32() + o[2];
                  for (int64_t i = 0; i < count; ++i)
                    out[i] = pc[i * st[0]] ? pa[i * st[1]] : pb[i * st[2]];
                });
  return Status::ok();
}

Status isNan(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (x.numElements() != y.numElements() || x.dtype != plan::F32 || y.dtype != plan::I64)
    return FSDPC_ERROR(kInvalidArgument, "is_nan: takes an f32 tensor to an i64 tensor of its size");
  std::transform(x.f32(), x.f32() + x.numElements(), y.i64(), [](float v) { return static_cast<int64_t>(std::isnan(v)); });
  return Status::ok();
}

Status compare(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &y = call.outputs[0];
  Comparison comparison = Comparison::kEqual;
  FSDPC_RETURN_IF_ERROR(comparisonOf(call, comparison));
  const bool floats = a.dtype == plan::F32 && b.dtype == plan::F32,
             integers = a.dtype == plan::I64 && b.dtype == plan::I64;
  if (!(floats || integers) || y.dtype != plan::I64)
    return FSDPC_ERROR(kInvalidArgument, "compare: takes two f32 or two i64 tensors to an i64 tensor");
  if (!broadcastsTo(a.shape, y.shape) || !broadcastsTo(b.shape, y.shape))
    return FSDPC_ERROR(kInvalidArgument, "compare: shapes ", shapeString(a.shape), " and ", shapeString(b.shape),
                       " do not broadcast to ", shapeString(y.shape));
  int64_t *out = y.i64();
  auto write = [&](const auto *pa, const auto *pb) {
    forEachBroadcast(y.shape, broadcastStrides(a.shape, y.shape), broadcastStrides(b.shape, y.shape),
                     [&](int64_t i, int64_t ia, int64_t ib) { out[i] = compareHolds(comparison, pa[ia], pb[ib]); });
  };
  if (floats)
    write(a.f32(), b.f32());
  else
    write(a.i64(), b.i64());
  return Status::ok();
}

Status cast(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  int64_t n = y.numElements();
  if (x.numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, "cast: input and output sizes differ");
  if (call.intParam(contract::Param::kToBool, 0)) {
    if (x.dtype != plan::I64 || y.dtype != plan::I64)
      return FSDPC_ERROR(kInvalidArgument, "cast: to_bool casts i64 to i64");
    std::transform(x.i64(), x.i64() + n, y.i64(), [](int64_t v) { return static_cast<int64_t>(v != 0); });
    return Status::ok();
  }
  if (x.dtype == y.dtype) {
    std::memcpy(y.data, x.data, n * dtypeSize(x.dtype));
    return Status::ok();
  }
  castElements(x, y);
  return Status::ok();
}

namespace {

/// Dropout's keep decision for one element: a counter-based hash of
/// (seed, step, rank, index), so backward redraws forward's mask exactly.
bool keepElement(uint64_t seed, const StepContext &context, int64_t index, double ratio) {
  uint64_t x = seed ^ (static_cast<uint64_t>(context.step) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(context.rank) * 0xC2B2AE3D27D4EB4Full) ^ static_cast<uint64_t>(index);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0) >= ratio;
}

} // namespace

Status dropout(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  double ratio = call.floatParam(contract::Param::kRatio, 0.5);
  uint64_t seed = static_cast<uint64_t>(call.intParam(contract::Param::kSeed, 0));
  StepContext context = call.context ? *call.context : StepContext();
  float scale = static_cast<float>(1.0 / (1.0 - ratio));
  int64_t n = y.numElements();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    y.f32()[i] = keepElement(seed, context, i, ratio) ? x.f32()[i] * scale : 0.0f;
  return Status::ok();
}

/// rotary (Forward) and rotary_grad: with the pairs (a, b) = (j, j + D/2)
/// for j < D/2, or (2j, 2j + 1) where interleaved, per row
///   forward:  out[a] = x[a] c[a] - x[b] s[a],  out[b] = x[b] c[b] + x[a] s[b]
///   gradient: dx[a] = dy[a] c[a] + dy[b] s[b],  dx[b] = dy[b] c[b] - dy[a] s[a]
/// each product rounded before the sum, as torch's x * cos + rotate_half(x)
/// * sin and its gradient compute them (the runtime builds without FMA
/// contraction).
template <bool Forward> Status rotate(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &cosTable = call.inputs[1], &sinTable = call.inputs[2], &out = call.outputs[0];
  const float *px = x.f32(), *pc = cosTable.f32(), *ps = sinTable.f32();
  float *po = out.f32();
  const int64_t half = x.shape.back() / 2;
  const bool interleaved = call.intParam(contract::Param::kInterleaved, 0) != 0;
  forEachRow<3>(
      x.shape,
      {stridesOf(x.shape), broadcastStrides(cosTable.shape, x.shape), broadcastStrides(sinTable.shape, x.shape)},
      [&](int64_t, const std::array<int64_t, 3> &offsets, int64_t, const std::array<int64_t, 3> &) {
        const float *xr = px + offsets[0], *cr = pc + offsets[1], *sr = ps + offsets[2];
        float *outRow = po + offsets[0];
        for (int64_t j = 0; j < half; ++j) {
          const int64_t a = interleaved ? 2 * j : j, b = interleaved ? 2 * j + 1 : j + half;
          const float first = xr[a], second = xr[b];
          if (Forward) {
            outRow[a] = first * cr[a] + -second * sr[a];
            outRow[b] = second * cr[b] + first * sr[b];
          } else {
            outRow[a] = first * cr[a] + second * sr[b];
            outRow[b] = second * cr[b] + -first * sr[a];
          }
        }
      });
  return Status::ok();
}

Status rotary(const KernelCall &call) { return rotate<true>(call); }
Status rotaryGrad(const KernelCall &call) { return rotate<false>(call); }

constexpr float kSqrtTwoOverPi = 0.79788456080286536f;
constexpr float kInvSqrtTwoPi = 0.39894228040143268f;
constexpr float kGeluCubic = 0.044715f;

namespace {

/// GELU and its gradient, shared by gelu(_grad) and gated_activation(_grad)
/// so that the fused kernels give the unfused ones' bits.
template <bool TanhForm> float geluOf(float x) {
  if constexpr (TanhForm)
    return 0.5f * x * (1.0f + vectorTanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x)));
  else
    return 0.5f * x * twiceNormalCdf(x, vectorExp(-0.5f * x * x));
}

template <bool TanhForm> float geluGradOf(float x, float dy) {
  if constexpr (TanhForm) {
    const float t = vectorTanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x));
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrtTwoOverPi * (1.0f + 3.0f * kGeluCubic * x * x));
  } else {
    const float gaussian = vectorExp(-0.5f * x * x);
    return dy * (0.5f * twiceNormalCdf(x, gaussian) + x * kInvSqrtTwoPi * gaussian);
  }
}

/// Runs `body(i)` for every element of a gated_activation(_grad) call,
/// whose operands all have the output's elements.
template <typename Body> Status forEachGated(const KernelCall &call, Body body) {
  const int64_t n = call.outputs[0].numElements();
  for (const TensorView &view : call.inputs)
    if (view.numElements() != n)
      return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": operand sizes differ");
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    body(i);
  return Status::ok();
}

template <GatedActivation Kind> Status gatedActivationAs(const KernelCall &call) {
  const float *gate = call.inputs[0].f32(), *up = call.inputs[1].f32();
  float *out = call.outputs[0].f32();
  return forEachGated(call, [&](int64_t i) {
    const float g = gate[i];
    if constexpr (Kind == GatedActivation::kSilu)
      out[i] = g * logistic(g) * up[i];
    else
      out[i] = geluOf<Kind == GatedActivation::kGeluTanh>(g) * up[i];
  });
}

/// The export's backward ops in their order: for silu, s = sigmoid(gate),
/// a = gate * s, out = a * up, so dup = dy * a, da = dy * up, and dgate =
/// da * s + sigmoid_grad(s, da * gate); for GELU, dgate = gelu_grad(gate,
/// dy * up).
template <GatedActivation Kind> Status gatedActivationGradAs(const KernelCall &call) {
  const float *gate = call.inputs[0].f32(), *up = call.inputs[1].f32(), *dy = call.inputs[2].f32();
  float *dgate = call.outputs[0].f32(), *dup = call.outputs[1].f32();
  return forEachGated(call, [&](int64_t i) {
    const float g = gate[i], da = dy[i] * up[i];
    if constexpr (Kind == GatedActivation::kSilu) {
      const float s = logistic(g);
      dup[i] = dy[i] * (g * s);
      dgate[i] = da * s + logisticGrad(s, da * g);
    } else {
      constexpr bool tanhForm = Kind == GatedActivation::kGeluTanh;
      dup[i] = dy[i] * geluOf<tanhForm>(g);
      dgate[i] = geluGradOf<tanhForm>(g, da);
    }
  });
}

} // namespace

Status gelu(const KernelCall &call) {
  bool tanhForm = false;
  FSDPC_RETURN_IF_ERROR(geluTanhForm(call, tanhForm));
  return tanhForm ? unary(call, geluOf<true>) : unary(call, geluOf<false>);
}

Status geluGrad(const KernelCall &call) {
  bool tanhForm = false;
  FSDPC_RETURN_IF_ERROR(geluTanhForm(call, tanhForm));
  return tanhForm ? unaryGrad(call, geluGradOf<true>) : unaryGrad(call, geluGradOf<false>);
}

Status gatedActivation(const KernelCall &call) {
  return withGatedActivation(call, [&](auto kind) { return gatedActivationAs<decltype(kind)::value>(call); });
}

Status gatedActivationGrad(const KernelCall &call) {
  return withGatedActivation(call, [&](auto kind) { return gatedActivationGradAs<decltype(kind)::value>(call); });
}

} // namespace fsdpc::runtime::cpu
