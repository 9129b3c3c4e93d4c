// Each CPU kernel against a naive double-precision reference.
#include "TestUtil.h"

#include "fsdpc/runtime/KernelContract.h"
#include "fsdpc/runtime/PlanFile.h"

#include <algorithm>
#include <cmath>

using namespace fsdpc;
using namespace fsdpc::test;

namespace {

double at(const Buffer &b, std::initializer_list<int64_t> index) {
  int64_t offset = 0;
  size_t d = 0;
  for (int64_t i : index)
    offset = offset * b.shape[d++] + i;
  return b.f[offset];
}

TEST(Kernels, MatmulAllTranspositions) {
  const int64_t m = 7, k = 5, n = 3;
  for (int transA = 0; transA < 2; ++transA) {
    for (int transB = 0; transB < 2; ++transB) {
      Buffer a = randomBuffer(transA ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, 1);
      Buffer b = randomBuffer(transB ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, 2);
      Buffer c = zeros({m, n});
      plan::Instruction inst;
      (*inst.mutable_int_attrs())["transpose_a"] = transA;
      (*inst.mutable_int_attrs())["transpose_b"] = transB;
      ASSERT_TRUE(runKernel("matmul", {&a, &b}, {&c}, inst).isOk());
      std::vector<double> want(m * n, 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t p = 0; p < k; ++p)
            want[i * n + j] += (transA ? at(a, {p, i}) : at(a, {i, p})) * (transB ? at(b, {j, p}) : at(b, {p, j}));
      expectNear(c.f, want, 1e-5);
    }
  }
}

TEST(Kernels, MatmulBiasStartsEveryRowWithTheBias) {
  const int64_t m = 9, k = 4, n = 5;
  Buffer a = randomBuffer({m, k}, 11), b = randomBuffer({n, k}, 12), bias = randomBuffer({n}, 13), c = zeros({m, n});
  plan::Instruction inst;
  (*inst.mutable_int_attrs())["transpose_b"] = 1;
  ASSERT_TRUE(runKernel("matmul_bias", {&a, &b, &bias}, {&c}, inst).isOk());
  std::vector<double> want(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      want[i * n + j] = bias.f[j];
      for (int64_t p = 0; p < k; ++p)
        want[i * n + j] += at(a, {i, p}) * at(b, {j, p});
    }
  expectNear(c.f, want, 1e-5);
  Buffer wrongBias = randomBuffer({n + 1}, 14);
  EXPECT_FALSE(runKernel("matmul_bias", {&a, &b, &wrongBias}, {&c}, inst).isOk());
}

// matmul_bias_grad is what the lowering makes of a weight-gradient GEMM and
// the sum_to of its dY: it must give the two kernels' bits, so that fusing
// them changes no loss. The weight gradient is X^T dY (dY is B; A is
// transposed or not) or, with bias_grad_of_a, dY^T X (dY is A, a weight
// stored [out, in]); 300 rows exercise the GEMM's thread split.
TEST(Kernels, MatmulBiasGradIsMatmulAndSumToBitForBit) {
  for (int variant = 0; variant < 3; ++variant) {
    const bool transA = variant > 0, ofA = variant == 2;
    SCOPED_TRACE(ofA ? "bias_grad_of_a" : transA ? "transpose_a" : "plain");
    const int64_t rows = 300, m = 37, n = 29, features = ofA ? m : n;
    Buffer dy = randomBuffer({rows, features}, 32);
    Buffer x = randomBuffer(!transA ? std::vector<int64_t>{m, rows} : std::vector<int64_t>{rows, ofA ? n : m}, 31);
    Buffer &a = ofA ? dy : x, &b = ofA ? x : dy;
    plan::Instruction inst;
    (*inst.mutable_int_attrs())["transpose_a"] = transA;
    Buffer weightGrad = zeros({m, n}), biasGrad = zeros({features});
    ASSERT_TRUE(runKernel("matmul", {&a, &b}, {&weightGrad}, inst).isOk());
    Buffer dy3 = dy;
    dy3.shape = {3, rows / 3, features}; // sum_to reads the unflattened dY, as in a plan
    ASSERT_TRUE(runKernel("sum_to", {&dy3}, {&biasGrad}).isOk());

    if (ofA)
      (*inst.mutable_int_attrs())["bias_grad_of_a"] = 1;
    Buffer fusedWeightGrad = zeros({m, n}), fusedBiasGrad = zeros({features});
    ASSERT_TRUE(runKernel("matmul_bias_grad", {&a, &b}, {&fusedWeightGrad, &fusedBiasGrad}, inst).isOk());
    for (size_t i = 0; i < weightGrad.f.size(); ++i)
      ASSERT_EQ(fusedWeightGrad.f[i], weightGrad.f[i]) << "weight gradient element " << i;
    for (int64_t j = 0; j < features; ++j) {
      ASSERT_EQ(fusedBiasGrad.f[j], biasGrad.f[j]) << "bias gradient element " << j;
      double want = 0;
      for (int64_t r = 0; r < rows; ++r)
        want += dy.f[r * features + j];
      EXPECT_NEAR(fusedBiasGrad.f[j], want, 1e-4 * (1 + std::abs(want)));
    }
  }
}

// gated_activation(_grad) is what graph-fuse makes of the export's SwiGLU
// (sigmoid, mul, mul; backward mul, mul, mul, mul, sigmoid_grad, add) and
// GeGLU (gelu, mul; backward mul, mul, gelu_grad): in f32 it must give the
// unfused kernels' bits, so that fusing changes no f32 loss. Also checked
// against act(g) * u and its derivatives in double.
TEST(Kernels, GatedActivationIsTheUnfusedOpsBitForBit) {
  const std::vector<int64_t> shape = {7, 301};
  Buffer gate = randomBuffer(shape, 41), up = randomBuffer(shape, 42), dy = randomBuffer(shape, 43);
  auto run = [&](const std::string &op, std::vector<Buffer *> in, plan::Instruction inst = {}) {
    Buffer out = zeros(shape);
    EXPECT_TRUE(runKernel(op, in, {&out}, inst).isOk()) << op;
    return out;
  };
  for (const std::string activation : {"silu", "gelu", "gelu_tanh"}) {
    SCOPED_TRACE(activation);
    plan::Instruction fused, gelu;
    (*fused.mutable_string_attrs())["activation"] = activation;
    (*gelu.mutable_string_attrs())["approximate"] = activation == "gelu_tanh" ? "tanh" : "none";
    Buffer result = zeros(shape), dgate = zeros(shape), dup = zeros(shape);
    ASSERT_TRUE(runKernel("gated_activation", {&gate, &up}, {&result}, fused).isOk());
    ASSERT_TRUE(runKernel("gated_activation_grad", {&gate, &up, &dy}, {&dgate, &dup}, fused).isOk());

    Buffer want, wantDgate, wantDup;
    Buffer da = run("mul", {&dy, &up});
    if (activation == "silu") {
      Buffer s = run("sigmoid", {&gate}), a = run("mul", {&gate, &s});
      want = run("mul", {&a, &up});
      wantDup = run("mul", {&dy, &a});
      Buffer viaS = run("mul", {&da, &s}), dsInput = run("mul", {&da, &gate});
      Buffer viaSigmoid = run("sigmoid_grad", {&s, &dsInput});
      wantDgate = run("add", {&viaS, &viaSigmoid});
    } else {
      Buffer a = run("gelu", {&gate}, gelu);
      want = run("mul", {&a, &up});
      wantDup = run("mul", {&dy, &a});
      wantDgate = run("gelu_grad", {&gate, &da}, gelu);
    }
    for (size_t i = 0; i < want.f.size(); ++i) {
      ASSERT_EQ(result.f[i], want.f[i]) << "result element " << i;
      ASSERT_EQ(dgate.f[i], wantDgate.f[i]) << "dgate element " << i;
      ASSERT_EQ(dup.f[i], wantDup.f[i]) << "dup element " << i;
    }
    // And in double: act(g), act'(g) by the formulas.
    for (size_t i = 0; i < want.f.size(); i += 37) {
      const double g = gate.f[i], u = up.f[i], d = dy.f[i];
      double act, slope;
      if (activation == "silu") {
        const double s = 1 / (1 + std::exp(-g));
        act = g * s;
        slope = s * (1 + g * (1 - s));
      } else if (activation == "gelu") {
        act = 0.5 * g * (1 + std::erf(g / std::sqrt(2.0)));
        slope = 0.5 * (1 + std::erf(g / std::sqrt(2.0))) + g * std::exp(-0.5 * g * g) / std::sqrt(2 * M_PI);
      } else {
        const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (g + 0.044715 * g * g * g));
        act = 0.5 * g * (1 + t);
        slope = 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * k * (1 + 3 * 0.044715 * g * g);
      }
      EXPECT_NEAR(result.f[i], act * u, 1e-5 * (1 + std::abs(act * u)));
      EXPECT_NEAR(dup.f[i], d * act, 1e-5 * (1 + std::abs(d * act)));
      EXPECT_NEAR(dgate.f[i], d * u * slope, 1e-5 * (1 + std::abs(d * u * slope)));
    }
  }
  plan::Instruction unknown;
  (*unknown.mutable_string_attrs())["activation"] = "relu";
  Buffer out = zeros(shape);
  EXPECT_FALSE(runKernel("gated_activation", {&gate, &up}, {&out}, unknown).isOk());
}

// accumulate is what the lowering makes of a residual add (or a gradient
// sum) after a GEMM or a norm's input gradient: in f32 it must give the
// kernel's bits and then the add's, so that folding changes no f32 loss.
// The sums are also checked against a reference computed here in double.
// 300 rows exercise the GEMM's thread split.
TEST(Kernels, AccumulateIsTheKernelThenTheAddBitForBit) {
  plan::Instruction plain;
  (*plain.mutable_int_attrs())["transpose_b"] = 1;
  plan::Instruction accumulating = plain;
  (*accumulating.mutable_int_attrs())["accumulate"] = 1;
  const int64_t m = 300, k = 13, n = 21;
  Buffer a = randomBuffer({3, m / 3, k}, 41), b = randomBuffer({n, k}, 42), bias = randomBuffer({n}, 43);
  Buffer addend = randomBuffer({3, m / 3, n}, 44);
  for (bool withBias : {false, true}) {
    SCOPED_TRACE(withBias ? "matmul_bias" : "matmul");
    const char *op = withBias ? "matmul_bias" : "matmul";
    std::vector<Buffer *> operands = {&a, &b};
    if (withBias)
      operands.push_back(&bias);
    Buffer product = zeros({3, m / 3, n}), sum = zeros({3, m / 3, n}), fused = zeros({3, m / 3, n});
    ASSERT_TRUE(runKernel(op, operands, {&product}, plain).isOk());
    ASSERT_TRUE(runKernel("add", {&addend, &product}, {&sum}).isOk());
    operands.push_back(&addend);
    ASSERT_TRUE(runKernel(op, operands, {&fused}, accumulating).isOk());
    std::vector<double> want(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double v = addend.f[i * n + j] + (withBias ? bias.f[j] : 0.0);
        for (int64_t p = 0; p < k; ++p)
          v += static_cast<double>(a.f[i * k + p]) * b.f[j * k + p];
        want[i * n + j] = v;
      }
    for (size_t i = 0; i < sum.f.size(); ++i)
      ASSERT_EQ(fused.f[i], sum.f[i]) << "element " << i;
    expectNear(fused.f, want, 1e-5);
  }

  // The norms' input gradient, then the residual path's gradient added.
  const int64_t rows = 7, cols = 33;
  Buffer x = randomBuffer({rows, cols}, 51), scale = randomBuffer({cols}, 52), normBias = randomBuffer({cols}, 53);
  Buffer dy = randomBuffer({rows, cols}, 54), residual = randomBuffer({rows, cols}, 55);
  plan::Instruction norm;
  (*norm.mutable_int_attrs())["axis"] = 1;
  (*norm.mutable_float_attrs())["epsilon"] = 1e-5;
  plan::Instruction accumulatingNorm = norm;
  (*accumulatingNorm.mutable_int_attrs())["accumulate"] = 1;
  for (bool layer : {true, false}) {
    SCOPED_TRACE(layer ? "layer_norm_grad" : "rms_norm_grad");
    Buffer y = zeros({rows, cols}), mean = zeros({rows}), invStd = zeros({rows});
    std::vector<Buffer *> statistics = layer ? std::vector<Buffer *>{&mean, &invStd} : std::vector<Buffer *>{&invStd};
    if (layer)
      ASSERT_TRUE(runKernel("layer_norm", {&x, &scale, &normBias}, {&y, &mean, &invStd}, norm).isOk());
    else
      ASSERT_TRUE(runKernel("rms_norm", {&x, &scale}, {&y, &invStd}, norm).isOk());
    std::vector<Buffer *> inputs = {&x, &scale};
    inputs.insert(inputs.end(), statistics.begin(), statistics.end());
    inputs.push_back(&dy);
    Buffer dx = zeros({rows, cols}), dscale = zeros({cols}), dbias = zeros({cols}), sum = zeros({rows, cols});
    Buffer fusedDx = zeros({rows, cols}), fusedDscale = zeros({cols}), fusedDbias = zeros({cols});
    std::vector<Buffer *> outputs = {&dx, &dscale}, fusedOutputs = {&fusedDx, &fusedDscale};
    if (layer)
      outputs.push_back(&dbias), fusedOutputs.push_back(&fusedDbias);
    const char *op = layer ? "layer_norm_grad" : "rms_norm_grad";
    ASSERT_TRUE(runKernel(op, inputs, outputs, norm).isOk());
    ASSERT_TRUE(runKernel("add", {&dx, &residual}, {&sum}).isOk());
    inputs.push_back(&residual);
    ASSERT_TRUE(runKernel(op, inputs, fusedOutputs, accumulatingNorm).isOk());
    for (size_t i = 0; i < sum.f.size(); ++i)
      ASSERT_EQ(fusedDx.f[i], sum.f[i]) << "element " << i;
    for (int64_t j = 0; j < cols; ++j) {
      ASSERT_EQ(fusedDscale.f[j], dscale.f[j]);
      ASSERT_EQ(fusedDbias.f[j], dbias.f[j]);
    }
  }
}

TEST(Kernels, MatmulBatchedLhs) {
  Buffer a = randomBuffer({2, 3, 4}, 3), b = randomBuffer({4, 5}, 4), c = zeros({2, 3, 5});
  ASSERT_TRUE(runKernel("matmul", {&a, &b}, {&c}).isOk());
  std::vector<double> want(30, 0.0);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t p = 0; p < 4; ++p)
        want[r * 5 + j] += a.f[r * 4 + p] * b.f[p * 5 + j];
  expectNear(c.f, want, 1e-5);
}

TEST(Kernels, BroadcastBinaryOps) {
  Buffer a = randomBuffer({4, 1, 3}, 5), b = randomBuffer({2, 1}, 6), out = zeros({4, 2, 3});
  const char *names[] = {"add", "sub", "mul", "div"};
  for (int op = 0; op < 4; ++op) {
    ASSERT_TRUE(runKernel(names[op], {&a, &b}, {&out}).isOk());
    std::vector<double> want;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t k = 0; k < 3; ++k) {
          double x = a.f[i * 3 + k], y = b.f[j];
          want.push_back(op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y);
        }
    expectNear(out.f, want, 1e-6);
  }
}

// i64 arithmetic, against values worked out by hand: quotients truncate
// toward zero (ONNX's Div), a zero divisor gives 0, overflow wraps around.
TEST(Kernels, IntegerArithmeticTruncatesAndWraps) {
  Buffer a, b;
  a.shape = {6};
  a.i = {7, -7, 7, -7, INT64_MIN, INT64_MAX};
  b.shape = {2, 1};
  b.i = {-2, 0};
  const std::pair<const char *, std::vector<int64_t>> expected[] = {
      {"add", {5, -9, 5, -9, INT64_MAX - 1, INT64_MAX - 2, 7, -7, 7, -7, INT64_MIN, INT64_MAX}},
      {"sub", {9, -5, 9, -5, INT64_MIN + 2, INT64_MIN + 1, 7, -7, 7, -7, INT64_MIN, INT64_MAX}},
      {"mul", {-14, 14, -14, 14, 0, 2, 0, 0, 0, 0, 0, 0}},
      {"div", {-3, 3, -3, 3, int64_t(1) << 62, -(INT64_MAX / 2), 0, 0, 0, 0, 0, 0}}};
  for (const auto &[op, want] : expected) {
    Buffer out;
    out.shape = {2, 6};
    out.i.assign(12, -1);
    ASSERT_TRUE(runKernel(op, {&a, &b}, {&out}).isOk()) << op;
    EXPECT_EQ(out.i, want) << op;
  }
  // INT64_MIN / -1 wraps to INT64_MIN (C++ would trap).
  Buffer lowest, minusOne, quotient;
  lowest.shape = minusOne.shape = quotient.shape = {1};
  lowest.i = {INT64_MIN};
  minusOne.i = {-1};
  quotient.i = {0};
  ASSERT_TRUE(runKernel("div", {&lowest, &minusOne}, {&quotient}).isOk());
  EXPECT_EQ(quotient.i, (std::vector<int64_t>{INT64_MIN}));
  // pow takes floats only.
  EXPECT_FALSE(runKernel("pow", {&lowest, &minusOne}, {&quotient}).isOk());
}

TEST(Kernels, BroadcastMismatchIsAnError) {
  Buffer a = randomBuffer({4, 3}, 5), b = randomBuffer({2}, 6), out = zeros({4, 3});
  EXPECT_FALSE(runKernel("add", {&a, &b}, {&out}).isOk());
}

TEST(Kernels, SumToReducesBroadcastDims) {
  Buffer x = randomBuffer({4, 2, 3}, 7), y = zeros({2, 1});
  ASSERT_TRUE(runKernel("sum_to", {&x}, {&y}).isOk());
  std::vector<double> want(2, 0.0);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k)
        want[j] += x.f[(i * 2 + j) * 3 + k];
  expectNear(y.f, want, 1e-5);

  Buffer bias = zeros({3});
  ASSERT_TRUE(runKernel("sum_to", {&x}, {&bias}).isOk());
  std::vector<double> wantBias(3, 0.0);
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t k = 0; k < 3; ++k)
      wantBias[k] += x.f[r * 3 + k];
  expectNear(bias.f, wantBias, 1e-5);
}

TEST(Kernels, ActivationsAndTheirGradients) {
  Buffer x = randomBuffer({5, 4}, 8), y = zeros({5, 4}), dy = randomBuffer({5, 4}, 9), dx = zeros({5, 4});
  struct Case {
    const char *forward, *backward;
    double (*f)(double);
    double (*grad)(double y, double dy);
  } cases[] = {
      {"relu", "relu_grad", [](double v) { return v > 0 ? v : 0; }, [](double o, double g) { return o > 0 ? g : 0; }},
      {"tanh", "tanh_grad", [](double v) { return std::tanh(v); }, [](double o, double g) { return g * (1 - o * o); }},
      {"sigmoid", "sigmoid_grad", [](double v) { return 1 / (1 + std::exp(-v)); },
       [](double o, double g) { return g * o * (1 - o); }},
  };
  for (const Case &c : cases) {
    ASSERT_TRUE(runKernel(c.forward, {&x}, {&y}).isOk());
    std::vector<double> want, wantGrad;
    for (size_t i = 0; i < x.f.size(); ++i) {
      want.push_back(c.f(x.f[i]));
      wantGrad.push_back(c.grad(y.f[i], dy.f[i]));
    }
    expectNear(y.f, want, 1e-6);
    ASSERT_TRUE(runKernel(c.backward, {&y, &dy}, {&dx}).isOk());
    expectNear(dx.f, wantGrad, 1e-6);
  }
}

// rotary: x cos + rotate_half(x) sin in double, cos and sin broadcast over
// heads (and over the batch in the second case); rotary_grad: the
// transpose of that linear map, column by column from the forward formula
// on unit vectors, applied to dy.
TEST(Kernels, RotaryAndItsGradientAgainstTheFormula) {
  const std::vector<int64_t> shape = {3, 5, 2, 6};
  for (auto [tableShape, interleaved] :
       {std::pair(std::vector<int64_t>{3, 5, 1, 6}, false), std::pair(std::vector<int64_t>{1, 5, 1, 6}, false),
        std::pair(std::vector<int64_t>{3, 5, 1, 6}, true), std::pair(std::vector<int64_t>{1, 5, 1, 6}, true)}) {
    SCOPED_TRACE(interleaved ? "interleaved" : "halves");
    plan::Instruction inst;
    if (interleaved)
      (*inst.mutable_int_attrs())["interleaved"] = 1;
    Buffer x = randomBuffer(shape, 21), c = randomBuffer(tableShape, 22), s = randomBuffer(tableShape, 23);
    Buffer dy = randomBuffer(shape, 24), out = zeros(shape), dx = zeros(shape);
    const int64_t n = x.f.size(), width = shape.back(), half = width / 2;
    auto tableIndex = [&](int64_t i) {
      const int64_t j = i % width, t = (i / (width * shape[2])) % shape[1], b = i / (width * shape[2] * shape[1]);
      return ((tableShape[0] == 1 ? 0 : b) * shape[1] + t) * width + j;
    };
    auto forward = [&](const std::vector<double> &in) {
      std::vector<double> result(n);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t j = i % width;
        // rotate_half: (-x2, x1) of the halves, or of each adjacent pair
        const double rotated =
            interleaved ? (j % 2 == 0 ? -in[i + 1] : in[i - 1]) : (j < half ? -in[i + half] : in[i - half]);
        result[i] = in[i] * c.f[tableIndex(i)] + rotated * s.f[tableIndex(i)];
      }
      return result;
    };
    ASSERT_TRUE(runKernel("rotary", {&x, &c, &s}, {&out}, inst).isOk());
    expectNear(out.f, forward(std::vector<double>(x.f.begin(), x.f.end())), 1e-6);
    std::vector<double> wantGrad(n, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> unit(n, 0.0);
      unit[i] = 1.0;
      const std::vector<double> column = forward(unit);
      for (int64_t k = 0; k < n; ++k)
        wantGrad[i] += column[k] * dy.f[k];
    }
    ASSERT_TRUE(runKernel("rotary_grad", {&dy, &c, &s}, {&dx}, inst).isOk());
    expectNear(dx.f, wantGrad, 1e-6);
  }
}

TEST(Kernels, SoftmaxAndLogSoftmaxAlongMiddleAxis) {
  Buffer x = randomBuffer({2, 3, 4}, 10), y = zeros({2, 3, 4}), logY = zeros({2, 3, 4});
  plan::Instruction inst;
  (*inst.mutable_int_attrs())["axis"] = 1;
  ASSERT_TRUE(runKernel("softmax", {&x}, {&y}, inst).isOk());
  ASSERT_TRUE(runKernel("log_softmax", {&x}, {&logY}, inst).isOk());
  std::vector<double> want(24), wantLog(24);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 4; ++k) {
      double sum = 0;
      for (int64_t j = 0; j < 3; ++j)
        sum += std::exp(x.f[(i * 3 + j) * 4 + k]);
      for (int64_t j = 0; j < 3; ++j) {
        int64_t o = (i * 3 + j) * 4 + k;
        want[o] = std::exp(x.f[o]) / sum;
        wantLog[o] = x.f[o] - std::log(sum);
      }
    }
  expectNear(y.f, want, 1e-6);
  expectNear(logY.f, wantLog, 1e-6);

  // Gradients against central finite differences of sum(dy * f(x)).
  Buffer dy = randomBuffer({2, 3, 4}, 11), dx = zeros({2, 3, 4}), dxLog = zeros({2, 3, 4});
  ASSERT_TRUE(runKernel("softmax_grad", {&y, &dy}, {&dx}, inst).isOk());
  ASSERT_TRUE(runKernel("log_softmax_grad", {&logY, &dy}, {&dxLog}, inst).isOk());
  for (int logMode = 0; logMode < 2; ++logMode) {
    std::vector<double> numeric(24);
    for (int64_t e = 0; e < 24; ++e) {
      double h = 1e-2, sides[2];
      for (int s = 0; s < 2; ++s) {
        Buffer xp = x, yp = zeros({2, 3, 4});
        xp.f[e] += s ? -h : h;
        EXPECT_TRUE(runKernel(logMode ? "log_softmax" : "softmax", {&xp}, {&yp}, inst).isOk());
        sides[s] = 0;
        for (int64_t q = 0; q < 24; ++q)
          sides[s] += dy.f[q] * yp.f[q];
      }
      numeric[e] = (sides[0] - sides[1]) / (2 * h);
    }
    expectNear(logMode ? dxLog.f : dx.f, numeric, 2e-3);
  }
}

TEST(Kernels, SoftmaxCrossEntropyMatchesReferenceAndRejectsBadLabels) {
  Buffer logits = randomBuffer({6, 4}, 12), loss = zeros({}), grad = zeros({6, 4}), seed = zeros({});
  seed.f[0] = 1.0f;
  Buffer labels;
  labels.shape = {6};
  labels.i = {0, 3, 1, 2, 3, -100};
  plan::Instruction inst;
  (*inst.mutable_int_attrs())["ignore_index"] = -100;
  (*inst.mutable_int_attrs())["mean"] = 1;
  ASSERT_TRUE(runKernel("softmax_cross_entropy", {&logits, &labels}, {&loss}, inst).isOk());
  double total = 0;
  std::vector<double> wantGrad(24, 0.0);
  for (int64_t r = 0; r < 5; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < 4; ++c)
      sum += std::exp(logits.f[r * 4 + c]);
    total += std::log(sum) - logits.f[r * 4 + labels.i[r]];
    for (int64_t c = 0; c < 4; ++c)
      wantGrad[r * 4 + c] = (std::exp(logits.f[r * 4 + c]) / sum - (c == labels.i[r])) / 5.0;
  }
  EXPECT_NEAR(loss.f[0], total / 5, 1e-6);
  ASSERT_TRUE(runKernel("softmax_cross_entropy_grad", {&logits, &labels, &seed}, {&grad}, inst).isOk());
  expectNear(grad.f, wantGrad, 1e-6);

  labels.i[0] = 4;
  runtime::Status status = runKernel("softmax_cross_entropy", {&logits, &labels}, {&loss}, inst);
  EXPECT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("label 4"), std::string::npos) << status.message();
}

// softmax_cross_entropy_with_grad is what the lowering makes of a loss and
// its gradient on the same logits: it must give the two kernels' bits, so
// that fusing them changes no loss. Apart and in place over the logits; mean
// with an ignored row, and sum; many classes (the CPU kernel's vectorised
// loops and their tails).
TEST(Kernels, SoftmaxCrossEntropyWithGradIsBothKernelsBitForBit) {
  for (int64_t classes : {4, 67, 5003})
    for (bool mean : {true, false})
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE("classes " + std::to_string(classes) + (mean ? " mean" : " sum") + (inPlace ? " in place" : ""));
        const int64_t rows = 9;
        Buffer logits = randomBuffer({rows, classes}, 21 + classes), seed = zeros({}), loss = zeros({}),
               grad = zeros({rows, classes});
        seed.f[0] = 0.75f;
        for (float &x : logits.f)
          x *= 4.0f;
        Buffer labels;
        labels.shape = {rows};
        for (int64_t r = 0; r < rows; ++r)
          labels.i.push_back(r == 3 ? -100 : (r * 7919) % classes);
        plan::Instruction inst;
        (*inst.mutable_int_attrs())["ignore_index"] = -100;
        (*inst.mutable_string_attrs())["reduction"] = mean ? "mean" : "sum";
        ASSERT_TRUE(runKernel("softmax_cross_entropy", {&logits, &labels}, {&loss}, inst).isOk());
        ASSERT_TRUE(runKernel("softmax_cross_entropy_grad", {&logits, &labels, &seed}, {&grad}, inst).isOk());

        Buffer fusedLogits = logits, fusedLoss = zeros({}), fusedGrad = zeros({rows, classes});
        Buffer *gradOut = inPlace ? &fusedLogits : &fusedGrad;
        ASSERT_TRUE(
            runKernel("softmax_cross_entropy_with_grad", {&fusedLogits, &labels, &seed}, {&fusedLoss, gradOut}, inst)
                .isOk());
        EXPECT_EQ(fusedLoss.f[0], loss.f[0]);
        ASSERT_EQ(gradOut->f.size(), grad.f.size());
        for (size_t k = 0; k < grad.f.size(); ++k)
          ASSERT_EQ(gradOut->f[k], grad.f[k]) << "at element " << k;
      }
}

// With `classes`, the columns past it are padding (graph-pad-classes pads
// a vocabulary to a multiple of 8): the loss and the classes' gradient
// equal those of the unpadded logits bit for bit, whatever the padding
// holds (here huge values, which would dominate a softmax that read them),
// the padding's gradient is zero, and a label past `classes` is an error
// though it lies within the row.
TEST(Kernels, SoftmaxCrossEntropyPaddedClassesAreThoseOfTheUnpaddedLogits) {
  const int64_t rows = 5, classes = 61, pitch = 64;
  Buffer logits = randomBuffer({rows, classes}, 31), padded = zeros({rows, pitch}), seed = zeros({});
  seed.f[0] = 1.0f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < pitch; ++c)
      padded.f[r * pitch + c] = c < classes ? logits.f[r * classes + c] : 1e30f;
  Buffer labels;
  labels.shape = {rows};
  labels.i = {0, 60, 7, -100, 33};
  plan::Instruction inst, paddedInst;
  (*inst.mutable_int_attrs())["ignore_index"] = -100;
  paddedInst = inst;
  (*paddedInst.mutable_int_attrs())["classes"] = classes;
  Buffer loss = zeros({}), grad = zeros({rows, classes}), paddedLoss = zeros({}), paddedGrad = zeros({rows, pitch});
  ASSERT_TRUE(runKernel("softmax_cross_entropy", {&logits, &labels}, {&loss}, inst).isOk());
  ASSERT_TRUE(runKernel("softmax_cross_entropy_grad", {&logits, &labels, &seed}, {&grad}, inst).isOk());
  auto expectPaddedGrad = [&](const Buffer &got) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < pitch; ++c)
        ASSERT_EQ(got.f[r * pitch + c], c < classes ? grad.f[r * classes + c] : 0.0f) << "row " << r << " column " << c;
  };
  ASSERT_TRUE(runKernel("softmax_cross_entropy", {&padded, &labels}, {&paddedLoss}, paddedInst).isOk());
  EXPECT_EQ(paddedLoss.f[0], loss.f[0]);
  ASSERT_TRUE(runKernel("softmax_cross_entropy_grad", {&padded, &labels, &seed}, {&paddedGrad}, paddedInst).isOk());
  expectPaddedGrad(paddedGrad);
  Buffer fused = padded, fusedLoss = zeros({});
  ASSERT_TRUE(
      runKernel("softmax_cross_entropy_with_grad", {&fused, &labels, &seed}, {&fusedLoss, &fused}, paddedInst).isOk());
  EXPECT_EQ(fusedLoss.f[0], loss.f[0]);
  expectPaddedGrad(fused);

  labels.i[2] = 62;
  runtime::Status status = runKernel("softmax_cross_entropy", {&padded, &labels}, {&paddedLoss}, paddedInst);
  EXPECT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("label 62"), std::string::npos) << status.message();
}

TEST(Kernels, MseLossAndGradient) {
  Buffer p = randomBuffer({3, 2}, 13), t = randomBuffer({3, 2}, 14), loss = zeros({}), seed = zeros({}),
         grad = zeros({3, 2});
  seed.f[0] = 1.0f;
  ASSERT_TRUE(runKernel("mse_loss", {&p, &t}, {&loss}).isOk());
  ASSERT_TRUE(runKernel("mse_loss_grad", {&p, &t, &seed}, {&grad}).isOk());
  double total = 0;
  std::vector<double> want;
  for (size_t i = 0; i < 6; ++i) {
    total += (p.f[i] - t.f[i]) * (p.f[i] - t.f[i]);
    want.push_back(2 * (p.f[i] - t.f[i]) / 6);
  }
  EXPECT_NEAR(loss.f[0], total / 6, 1e-6);
  expectNear(grad.f, want, 1e-6);
}

TEST(Kernels, TransposeThreeDims) {
  Buffer x = randomBuffer({2, 3, 4}, 15), y = zeros({4, 2, 3});
  plan::Instruction inst;
  for (int64_t p : {2, 0, 1})
    (*inst.mutable_int_list_attrs())["perm"].add_values(p);
  ASSERT_TRUE(runKernel("transpose", {&x}, {&y}, inst).isOk());
  std::vector<double> want;
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        want.push_back(x.f[(i * 3 + j) * 4 + k]);
  expectNear(y.f, want, 0);
}

// Integer tensors (positions, token ids) are transposed element for
// element; the kernel once read every dtype as f32.
TEST(Kernels, TransposeIntegers) {
  Buffer x, y;
  x.shape = {2, 3};
  x.i = {int64_t(1) << 40, 1, 2, 3, 4, -5};
  y.shape = {3, 2};
  y.i.assign(6, 0);
  plan::Instruction inst;
  for (int64_t p : {1, 0})
    (*inst.mutable_int_list_attrs())["perm"].add_values(p);
  ASSERT_TRUE(runKernel("transpose", {&x}, {&y}, inst).isOk());
  EXPECT_EQ(y.i, (std::vector<int64_t>{int64_t(1) << 40, 3, 1, 4, 2, -5}));
}

// Three AdamW steps against the torch 1.13 update written out in double.
TEST(Kernels, AdamwMatchesTorchFormula) {
  Buffer p = randomBuffer({10}, 16), m = zeros({10}), v = zeros({10});
  std::vector<double> pd(p.f.begin(), p.f.end()), md(10, 0), vd(10, 0);
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  plan::Instruction inst;
  (*inst.mutable_float_attrs())["lr"] = lr;
  (*inst.mutable_float_attrs())["beta1"] = b1;
  (*inst.mutable_float_attrs())["beta2"] = b2;
  (*inst.mutable_float_attrs())["eps"] = eps;
  (*inst.mutable_float_attrs())["weight_decay"] = wd;
  for (int64_t t = 1; t <= 3; ++t) {
    Buffer g = randomBuffer({10}, 100 + t), step;
    step.shape = {};
    step.i = {t};
    ASSERT_TRUE(runKernel("adamw_update", {&p, &g, &m, &v, &step}, {&p, &m, &v}, inst).isOk());
    for (int i = 0; i < 10; ++i) {
      pd[i] *= 1 - lr * wd;
      md[i] = b1 * md[i] + (1 - b1) * g.f[i];
      vd[i] = b2 * vd[i] + (1 - b2) * g.f[i] * g.f[i];
      double denom = std::sqrt(vd[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      pd[i] -= lr / (1 - std::pow(b1, t)) * md[i] / denom;
    }
  }
  expectNear(p.f, pd, 1e-5);
}

TEST(Kernels, SgdMomentumMatchesTorchFormula) {
  Buffer p = randomBuffer({8}, 17), buf = zeros({8});
  std::vector<double> pd(p.f.begin(), p.f.end()), bd(8, 0);
  const double lr = 0.1, mom = 0.9, wd = 0.05;
  plan::Instruction inst;
  (*inst.mutable_float_attrs())["lr"] = lr;
  (*inst.mutable_float_attrs())["momentum"] = mom;
  (*inst.mutable_float_attrs())["weight_decay"] = wd;
  for (int64_t t = 1; t <= 3; ++t) {
    Buffer g = randomBuffer({8}, 200 + t), step;
    step.shape = {};
    step.i = {t};
    ASSERT_TRUE(runKernel("sgd_update", {&p, &g, &buf, &step}, {&p, &buf}, inst).isOk());
    for (int i = 0; i < 8; ++i) {
      double d = g.f[i] + wd * pd[i];
      bd[i] = t == 1 ? d : mom * bd[i] + d;
      pd[i] -= lr * bd[i];
    }
  }
  expectNear(p.f, pd, 1e-5);
}

} // namespace

namespace {

// As torch: a NaN in a softmax row makes that row NaN and leaves the other
// rows alone (the fast exp once converted NaN to an int: undefined).
TEST(Kernels, SoftmaxPropagatesNaNPerRow) {
  Buffer x = randomBuffer({2, 4}, 3), y = zeros({2, 4});
  x.f[1] = std::nanf("");
  plan::Instruction inst;
  (*inst.mutable_int_attrs())["axis"] = 1;
  ASSERT_TRUE(runKernel("softmax", {&x}, {&y}, inst).isOk());
  for (int64_t k = 0; k < 4; ++k) {
    EXPECT_TRUE(std::isnan(y.f[k])) << "row 0, element " << k;
    EXPECT_FALSE(std::isnan(y.f[4 + k])) << "row 1, element " << k;
  }
}

// As torch's SDPA (_safe_softmax): a row whose every score is -inf (a
// query whose keys are all masked) gives zeros, and so a zero gradient, not
// NaN; a row of NaNs stays NaN; masked_softmax's fully masked rows too.
TEST(Kernels, SoftmaxOfAllMaskedRowIsZero) {
  Buffer x = randomBuffer({3, 4}, 5), y = zeros({3, 4}), dy = randomBuffer({3, 4}, 6), dx = zeros({3, 4});
  for (int64_t k = 0; k < 4; ++k) {
    x.f[k] = -INFINITY;
    x.f[8 + k] = std::nanf("");
  }
  plan::Instruction inst;
  (*inst.mutable_int_attrs())["axis"] = 1;
  ASSERT_TRUE(runKernel("softmax", {&x}, {&y}, inst).isOk());
  ASSERT_TRUE(runKernel("softmax_grad", {&y, &dy}, {&dx}, inst).isOk());
  double rowSum = 0;
  for (int64_t k = 0; k < 4; ++k) {
    EXPECT_EQ(y.f[k], 0.0f) << "all -inf row, element " << k;
    EXPECT_EQ(dx.f[k], 0.0f) << "its gradient, element " << k;
    EXPECT_TRUE(std::isnan(y.f[8 + k])) << "NaN row, element " << k;
    rowSum += y.f[4 + k];
  }
  EXPECT_NEAR(rowSum, 1.0, 1e-6);

  Buffer scores = randomBuffer({2, 3}, 7), mask, p = zeros({2, 3});
  mask.shape = {2, 3};
  mask.i = {1, 1, 1, 0, 1, 0};
  ASSERT_TRUE(runKernel("masked_softmax", {&scores, &mask}, {&p}).isOk());
  for (int64_t k = 0; k < 3; ++k)
    EXPECT_EQ(p.f[k], 0.0f) << "fully masked row, element " << k;
  EXPECT_NEAR(p.f[3] + p.f[5], 1.0, 1e-6);
  EXPECT_EQ(p.f[4], 0.0f);
}

TEST(Kernels, IsNanMarksNaNsOnly) {
  Buffer x = randomBuffer({3, 5}, 7);
  x.f[1] = std::nanf("");
  x.f[7] = -std::nanf("");
  x.f[9] = INFINITY; // infinite is not NaN
  Buffer mask;
  mask.shape = {3, 5};
  mask.i.assign(15, -1);
  ASSERT_TRUE(runKernel("is_nan", {&x}, {&mask}).isOk());
  for (int64_t k = 0; k < 15; ++k)
    EXPECT_EQ(mask.i[k], (k == 1 || k == 7) ? 1 : 0) << "at element " << k;
}

// Every predicate on a row broadcast against a column, with equal operands
// and NaN (unequal to everything, itself included: only ne holds), written
// out by hand; and on integers.
TEST(Kernels, CompareBroadcastsAndTreatsNaNAsUnordered) {
  Buffer a, b;
  a.shape = {4};
  a.f = {-1.0f, 0.0f, 2.0f, std::nanf("")};
  b.shape = {2, 1};
  b.f = {0.0f, std::nanf("")};
  const std::pair<const char *, std::vector<int64_t>> expected[] = {
      {"eq", {0, 1, 0, 0, 0, 0, 0, 0}}, {"ne", {1, 0, 1, 1, 1, 1, 1, 1}}, {"lt", {1, 0, 0, 0, 0, 0, 0, 0}},
      {"le", {1, 1, 0, 0, 0, 0, 0, 0}}, {"gt", {0, 0, 1, 0, 0, 0, 0, 0}}, {"ge", {0, 1, 1, 0, 0, 0, 0, 0}}};
  for (const auto &[predicate, want] : expected) {
    Buffer mask;
    mask.shape = {2, 4};
    mask.i.assign(8, -1);
    plan::Instruction inst;
    (*inst.mutable_string_attrs())["predicate"] = predicate;
    ASSERT_TRUE(runKernel("compare", {&a, &b}, {&mask}, inst).isOk()) << predicate;
    EXPECT_EQ(mask.i, want) << predicate;
  }
  Buffer ids, pad, mask;
  ids.shape = {5};
  ids.i = {3, 0, 7, 0, 9007199254740993}; // above 2^53: not exact as a double
  pad.shape = {};
  pad.i = {9007199254740992};
  mask.shape = {5};
  mask.i.assign(5, -1);
  plan::Instruction inst;
  (*inst.mutable_string_attrs())["predicate"] = "gt";
  ASSERT_TRUE(runKernel("compare", {&ids, &pad}, {&mask}, inst).isOk());
  EXPECT_EQ(mask.i, (std::vector<int64_t>{0, 0, 0, 0, 1}));
}

// Float to integer truncates toward zero; NaN, the infinities and values
// outside int64 give INT64_MIN, as torch's .long() on x86 (C++ leaves them
// undefined: UBSan found a -inf in Hugging Face T5's bucket arithmetic).
TEST(Kernels, CastFloatToIntegerIsDefinedEverywhere) {
  Buffer x;
  x.shape = {7};
  x.f = {2.9f, -2.9f, std::nanf(""), INFINITY, -INFINITY, 1e19f, -1e19f};
  Buffer y;
  y.shape = {7};
  y.i.assign(7, 0);
  ASSERT_TRUE(runKernel("cast", {&x}, {&y}).isOk());
  const std::vector<int64_t> expected = {2, -2, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
  EXPECT_EQ(y.i, expected);
}

TEST(Kernels, OneHotRowsAndIgnoredLabels) {
  Buffer labels, rows = zeros({4, 3});
  labels.shape = {4};
  labels.i = {2, -100, 0, 1};
  plan::Instruction inst;
  (*inst.mutable_int_attrs())["ignore_index"] = -100;
  ASSERT_TRUE(runKernel("one_hot", {&labels}, {&rows}, inst).isOk());
  expectNear(rows.f, {0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0}, 0);
  // A label outside the classes that is not ignored is a data error.
  labels.i = {2, 3, 0, 1};
  runtime::Status bad = runKernel("one_hot", {&labels}, {&rows}, inst);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("label 3 at position 1 is outside [0, 3)"), std::string::npos) << bad.message();
}

TEST(Kernels, ArgMaxArgMinTiesAndNaN) {
  // [2, 4] along axis 1: a tie in row 0, a NaN in row 1.
  Buffer x = zeros({2, 4});
  x.f = {1, 5, 5, -2, 3, std::nanf(""), 7, -9};
  Buffer index;
  index.shape = {2, 1};
  index.i.assign(2, -1);
  plan::Instruction inst;
  (*inst.mutable_int_attrs())["axis"] = 1;
  ASSERT_TRUE(runKernel("arg_max", {&x}, {&index}, inst).isOk());
  EXPECT_EQ(index.i, (std::vector<int64_t>{1, 1}));
  ASSERT_TRUE(runKernel("arg_min", {&x}, {&index}, inst).isOk());
  EXPECT_EQ(index.i, (std::vector<int64_t>{3, 1}));
  (*inst.mutable_int_attrs())["select_last_index"] = 1;
  ASSERT_TRUE(runKernel("arg_max", {&x}, {&index}, inst).isOk());
  EXPECT_EQ(index.i, (std::vector<int64_t>{2, 1}));
  // Along axis 0 of the same data: columns of two.
  Buffer columns;
  columns.shape = {1, 4};
  columns.i.assign(4, -1);
  (*inst.mutable_int_attrs())["axis"] = 0;
  (*inst.mutable_int_attrs())["select_last_index"] = 0;
  ASSERT_TRUE(runKernel("arg_max", {&x}, {&columns}, inst).isOk());
  EXPECT_EQ(columns.i, (std::vector<int64_t>{1, 1, 1, 0}));
  // i64 input (positions times a mask, for the last token that is not
  // padding): beyond 2^53, where a double could not tell them apart.
  Buffer ids;
  ids.shape = {2, 3};
  ids.i = {9007199254740993, 9007199254740992, 0, -5, -5, INT64_MIN};
  (*inst.mutable_int_attrs())["axis"] = 1;
  ASSERT_TRUE(runKernel("arg_max", {&ids}, {&index}, inst).isOk());
  EXPECT_EQ(index.i, (std::vector<int64_t>{0, 0}));
  ASSERT_TRUE(runKernel("arg_min", {&ids}, {&index}, inst).isOk());
  EXPECT_EQ(index.i, (std::vector<int64_t>{2, 2}));
}

TEST(Kernels, NegScaleCopyFill) {
  Buffer x = randomBuffer({3, 4}, 18), y = zeros({3, 4}), flat = zeros({12});
  ASSERT_TRUE(runKernel("neg", {&x}, {&y}).isOk());
  std::vector<double> want;
  for (float v : x.f)
    want.push_back(-v);
  expectNear(y.f, want, 0);

  plan::Instruction scale;
  (*scale.mutable_float_attrs())["factor"] = 0.25;
  ASSERT_TRUE(runKernel("scale", {&x}, {&y}, scale).isOk());
  want.clear();
  for (float v : x.f)
    want.push_back(v * 0.25);
  expectNear(y.f, want, 1e-7);

  // copy is how reshapes run: same elements, another shape.
  ASSERT_TRUE(runKernel("copy", {&x}, {&flat}).isOk());
  EXPECT_EQ(flat.f, x.f);
  Buffer wrong = zeros({5});
  EXPECT_FALSE(runKernel("copy", {&x}, {&wrong}).isOk());

  plan::Instruction fill;
  (*fill.mutable_float_attrs())["value"] = 1.5;
  ASSERT_TRUE(runKernel("fill", {}, {&flat}, fill).isOk());
  EXPECT_EQ(flat.f, std::vector<float>(12, 1.5f));
}

} // namespace

namespace {

// The CPU backend implements exactly the kernel contract: every signature
// has a kernel, and no kernel is outside the contract (so the compiler's
// verifier knows it).
TEST(KernelContract, CpuBackendImplementsEverySignature) {
  std::vector<std::string> names;
  for (const contract::KernelSignature &signature : contract::kernelSignatures()) {
    names.emplace_back(signature.name);
    EXPECT_NE(runtime::lookupKernel(names.back()), nullptr) << "no CPU kernel for " << names.back();
  }
  for (const std::string &name : runtime::cpuKernelNames())
    EXPECT_NE(contract::findKernel(name), nullptr) << "CPU kernel " << name << " is not in the contract";
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "a kernel is listed twice";
}

// Kernels read parameters by id, decoded once at load: every parameter of
// the contract has one, and decoding puts each plan attribute under it.
TEST(KernelContract, EveryParameterHasAnId) {
  for (const contract::KernelSignature &signature : contract::kernelSignatures())
    for (const contract::AttrSpec &attr : signature.attrs) {
      ASSERT_NE(attr.id(), contract::Param::kCount) << signature.name << "." << attr.name;
      EXPECT_EQ(contract::paramName(attr.id()), attr.name);
    }
  plan::Instruction inst;
  inst.set_op("adamw_update");
  (*inst.mutable_float_attrs())["lr"] = 0.25;
  (*inst.mutable_int_attrs())["axis"] = -2;
  (*inst.mutable_string_attrs())["reduction"] = "sum";
  (*inst.mutable_int_list_attrs())["perm"].add_values(3);
  runtime::DecodedParams params = runtime::decodeParams(inst);
  runtime::KernelCall call;
  call.params = &params;
  EXPECT_EQ(call.floatParam(contract::Param::kLr, 1.0), 0.25);
  EXPECT_EQ(call.floatParam(contract::Param::kEps, 1e-8), 1e-8); // absent: the fallback
  EXPECT_EQ(call.intParam(contract::Param::kAxis, 0), -2);
  EXPECT_EQ(call.stringParam(contract::Param::kReduction, "mean"), "sum");
  EXPECT_EQ(call.intListParam(contract::Param::kPerm), std::vector<int64_t>{3});
}

TEST(KernelContract, AritiesAndParameters) {
  const contract::KernelSignature *sgd = contract::findKernel("sgd_update");
  ASSERT_NE(sgd, nullptr);
  EXPECT_EQ(contract::checkArity(*sgd, 3, 1), "");
  EXPECT_EQ(contract::checkArity(*sgd, 4, 2), "");
  EXPECT_EQ(contract::checkArity(*sgd, 5, 2), "takes 3 to 4 inputs, got 5");
  const contract::KernelSignature *concat = contract::findKernel("concat");
  ASSERT_NE(concat, nullptr);
  EXPECT_EQ(contract::checkArity(*concat, 7, 1), "");
  EXPECT_EQ(contract::checkArity(*concat, 0, 1), "takes 1 or more inputs, got 0");
  ASSERT_NE(sgd->findAttr("nesterov"), nullptr);
  EXPECT_EQ(sgd->findAttr("nesterov")->type, contract::AttrType::kBool);
  EXPECT_EQ(sgd->findAttr("betas"), nullptr);
  EXPECT_EQ(contract::findKernel("softplus"), nullptr);
}

// The plan loader checks instructions against the contract too: a plan
// written by hand or by another fsdpc is refused with the kernel's name.
TEST(KernelContract, PlanLoaderRefusesMismatches) {
  plan::Instruction inst;
  inst.set_op("softmax");
  inst.add_inputs(0);
  inst.add_outputs(1);
  (*inst.mutable_int_attrs())["axis"] = 1;
  EXPECT_TRUE(runtime::checkKernelContract(inst).isOk());
  plan::Instruction wrongType = inst;
  wrongType.mutable_int_attrs()->clear();
  (*wrongType.mutable_float_attrs())["axis"] = 1.0;
  EXPECT_NE(runtime::checkKernelContract(wrongType).message().find("parameter 'axis' must be int"), std::string::npos);
  plan::Instruction missing = inst;
  missing.mutable_int_attrs()->clear();
  EXPECT_NE(runtime::checkKernelContract(missing).message().find("needs parameter 'axis'"), std::string::npos);
  plan::Instruction oldEncoding;
  oldEncoding.set_op("softmax_cross_entropy");
  oldEncoding.add_inputs(0);
  oldEncoding.add_inputs(1);
  oldEncoding.add_outputs(2);
  (*oldEncoding.mutable_int_attrs())["mean"] = 1; // what format version 1 wrote
  EXPECT_NE(runtime::checkKernelContract(oldEncoding).message().find("has no parameter 'mean'"), std::string::npos);
  plan::Instruction arity = inst;
  arity.add_inputs(0);
  EXPECT_NE(runtime::checkKernelContract(arity).message().find("takes 1 input, got 2"), std::string::npos);
}

} // namespace

namespace {

// attention and attention_grad against the explicit formulas in double
// (scores, masked softmax, products), on odd sizes, with keys in both
// layouts and a mask broadcast over the batch; and with a query row that
// sees no key (a left-padded sequence's padding), whose probabilities,
// output and gradients are zeros, as torch's SDPA gives them; and with
// scores soft-capped as Gemma 2 does (c tanh(s / c), c = 1.5 against
// scores up to about 2).
TEST(Kernels, AttentionForwardAndGradient) {
  const int64_t batch = 3, tq = 5, tk = 7, d = 3, dv = 4, blindRow = 1;
  const double scale = 0.7;
  // With sinks: a logit per head (here batch index b is head b) in each
  // row's denominator, of both signs and the scores' size.
  const std::vector<float> sinkValues = {-1.0f, 0.5f, 2.0f};
  struct Case {
    bool keyTransposed, withBlindRow;
    double softcap;
    bool withSinks = false;
  };
  for (auto [keyTransposed, withBlindRow, softcap, withSinks] :
       {Case{false, false, 0.0}, Case{true, false, 0.0}, Case{false, true, 0.0}, Case{true, true, 0.0},
        Case{false, false, 1.5}, Case{true, true, 1.5}, Case{false, false, 0.0, true}, Case{true, true, 0.0, true},
        Case{false, true, 1.5, true}}) {
    SCOPED_TRACE(std::string(keyTransposed ? "keys transposed" : "key rows") +
                 (withBlindRow ? ", a row with every key masked" : "") + (softcap > 0 ? ", soft-capped" : "") +
                 (withSinks ? ", sinks" : ""));
    Buffer q = randomBuffer({batch, tq, d}, 21), v = randomBuffer({batch, tk, dv}, 23),
           k = randomBuffer(keyTransposed ? std::vector<int64_t>{batch, d, tk} : std::vector<int64_t>{batch, tk, d}, 22),
           dout = randomBuffer({batch, tq, dv}, 24);
    Buffer mask;
    mask.shape = {tq, tk};
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j)
        mask.i.push_back(j > i + 2 || (withBlindRow && i == blindRow));
    auto keyAt = [&](int64_t b, int64_t j, int64_t c) {
      return static_cast<double>(keyTransposed ? k.f[(b * d + c) * tk + j] : k.f[(b * tk + j) * d + c]);
    };
    // Reference: P, out, and the gradients from the explicit formulas.
    std::vector<double> p(batch * tq * tk, 0.0), out(batch * tq * dv, 0.0), dq(q.f.size(), 0.0), dk(k.f.size(), 0.0),
        dvRef(v.f.size(), 0.0), lseRef(batch * tq, 0.0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < tq; ++i) {
        double maxValue = -INFINITY, sum = 0;
        std::vector<double> s(tk);
        for (int64_t j = 0; j < tk; ++j) {
          s[j] = -INFINITY;
          if (mask.i[i * tk + j])
            continue;
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += q.f[(b * tq + i) * d + c] * keyAt(b, j, c);
          s[j] = softcap > 0 ? softcap * std::tanh(dot * scale / softcap) : dot * scale;
          maxValue = std::max(maxValue, s[j]);
        }
        const double sink = withSinks ? sinkValues[b] : -INFINITY;
        maxValue = std::max(maxValue, sink);
        if (maxValue == -INFINITY) // no key and no sink: P's row stays 0
          continue;
        sum = std::exp(sink - maxValue); // the sink's share of the denominator, without a value
        for (int64_t j = 0; j < tk; ++j)
          sum += std::exp(s[j] - maxValue);
        lseRef[b * tq + i] = maxValue + std::log(sum);
        for (int64_t j = 0; j < tk; ++j) {
          double pj = std::exp(s[j] - maxValue) / sum;
          p[(b * tq + i) * tk + j] = pj;
          for (int64_t c = 0; c < dv; ++c)
            out[(b * tq + i) * dv + c] += pj * v.f[(b * tk + j) * dv + c];
        }
      }
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < tq; ++i) {
        std::vector<double> dp(tk, 0.0), slope(tk, scale); // the score's derivative by q . k
        double rowDot = 0;
        for (int64_t j = 0; j < tk; ++j)
          for (int64_t c = 0; c < dv; ++c) {
            dp[j] += dout.f[(b * tq + i) * dv + c] * v.f[(b * tk + j) * dv + c];
            dvRef[(b * tk + j) * dv + c] += p[(b * tq + i) * tk + j] * dout.f[(b * tq + i) * dv + c];
          }
        for (int64_t j = 0; j < tk; ++j)
          rowDot += p[(b * tq + i) * tk + j] * dp[j];
        for (int64_t j = 0; softcap > 0 && j < tk; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += q.f[(b * tq + i) * d + c] * keyAt(b, j, c);
          const double t = std::tanh(dot * scale / softcap);
          slope[j] = scale * (1 - t * t);
        }
        for (int64_t j = 0; j < tk; ++j) {
          double ds = p[(b * tq + i) * tk + j] * (dp[j] - rowDot) * slope[j];
          for (int64_t c = 0; c < d; ++c) {
            dq[(b * tq + i) * d + c] += ds * keyAt(b, j, c);
            size_t kIndex = keyTransposed ? (b * d + c) * tk + j : (b * tk + j) * d + c;
            dk[kIndex] += ds * q.f[(b * tq + i) * d + c];
          }
        }
      }

    plan::Instruction inst;
    (*inst.mutable_float_attrs())["scale"] = scale;
    if (softcap > 0)
      (*inst.mutable_float_attrs())["softcap"] = softcap;
    (*inst.mutable_int_attrs())["key_transposed"] = keyTransposed;
    Buffer o = zeros({batch, tq, dv}), lse = zeros({batch, tq}), sinks = zeros({batch});
    sinks.f = sinkValues;
    std::vector<Buffer *> inputs = {&q, &k, &v, &mask};
    if (withSinks)
      inputs.push_back(&sinks);
    ASSERT_TRUE(runKernel("attention", inputs, {&o, &lse}, inst).isOk());
    expectNear(o.f, out, 1e-5);
    if (withSinks) // every row's, a row without keys too (its sink's)
      expectNear(lse.f, lseRef, 1e-5);
    for (int64_t b = 0; withBlindRow && b < batch; ++b) // finite: --check-nonfinite must not name it
      EXPECT_TRUE(std::isfinite(lse.f[b * tq + blindRow])) << "logsumexp of a row without keys";
    Buffer gq = zeros(q.shape), gk = zeros(k.shape), gv = zeros(v.shape);
    ASSERT_TRUE(runKernel("attention_grad", {&q, &k, &v, &mask, &o, &lse, &dout}, {&gq, &gk, &gv}, inst).isOk());
    expectNear(gq.f, dq, 1e-5);
    expectNear(gk.f, dk, 1e-5);
    expectNear(gv.f, dvRef, 1e-5);
  }
}

// A mixture of experts' projection against the formula in double: each
// row by its expert's matrix (weights [E, K, F] or transposed [E, F, K]),
// negative experts counted from the end, 2 rows a sample; the weights'
// gradient the sum of each expert's rows' products, zeros for an expert no
// row names; an expert outside [-E, E) refused.
TEST(Kernels, ExpertMatmulAndWeightGradientAgainstTheFormula) {
  const int64_t n = 7, m = 2, k = 5, f = 3, experts = 4;
  Buffer rowExperts;
  rowExperts.shape = {n};
  rowExperts.i = {2, 0, -1, 2, 3, 0, -4}; // experts 2, 0, 3, 2, 3, 0, 0: expert 1 has no row
  const std::vector<int64_t> expertOf = {2, 0, 3, 2, 3, 0, 0};
  for (bool transposed : {false, true}) {
    SCOPED_TRACE(transposed ? "weights [E, F, K]" : "weights [E, K, F]");
    Buffer x = randomBuffer({n, m, k}, 61), dy = randomBuffer({n, m, f}, 63),
           w = randomBuffer(transposed ? std::vector<int64_t>{experts, f, k} : std::vector<int64_t>{experts, k, f}, 62);
    auto weight = [&](int64_t e, int64_t kk, int64_t ff) {
      return static_cast<double>(transposed ? w.f[(e * f + ff) * k + kk] : w.f[(e * k + kk) * f + ff]);
    };
    std::vector<double> y(n * m * f, 0.0), dw(w.f.size(), 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t mi = 0; mi < m; ++mi)
        for (int64_t ff = 0; ff < f; ++ff)
          for (int64_t kk = 0; kk < k; ++kk) {
            const int64_t e = expertOf[r];
            y[(r * m + mi) * f + ff] += x.f[(r * m + mi) * k + kk] * weight(e, kk, ff);
            const size_t wi = transposed ? (e * f + ff) * k + kk : (e * k + kk) * f + ff;
            dw[wi] += static_cast<double>(x.f[(r * m + mi) * k + kk]) * dy.f[(r * m + mi) * f + ff];
          }
    plan::Instruction inst;
    (*inst.mutable_int_attrs())["transpose_weights"] = transposed;
    Buffer out = zeros({n, m, f}), gw = randomBuffer(w.shape, 64); // the gradient overwrites what was there
    ASSERT_TRUE(runKernel("expert_matmul", {&x, &w, &rowExperts}, {&out}, inst).isOk());
    expectNear(out.f, y, 1e-5);
    ASSERT_TRUE(runKernel("expert_matmul_weight_grad", {&x, &dy, &rowExperts}, {&gw}, inst).isOk());
    expectNear(gw.f, dw, 1e-5);
    for (int64_t i = 0; i < k * f; ++i) // expert 1: no row
      EXPECT_EQ(gw.f[1 * k * f + i], 0.0f);
  }
  Buffer x = randomBuffer({n, m, k}, 61), w = randomBuffer({experts, k, f}, 62), out = zeros({n, m, f});
  Buffer outside = rowExperts;
  outside.i[3] = experts;
  runtime::Status status = runKernel("expert_matmul", {&x, &w, &outside}, {&out});
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("expert 4 of row 3 is outside [-4, 4)"), std::string::npos) << status.message();
}

// Grouped-query attention (key and value with fewer heads than the query)
// against attention on the key and value heads copied for every query head
// as transformers' repeat_kv does (checked against the formulas above):
// the same outputs, and a key or value head's gradient is the sum of its
// copies' gradients. 6 query heads on 2 key heads and on 1, keys in both
// layouts, a causal mask.
TEST(Kernels, GroupedKeyValueHeadsEqualAttentionOnRepeatedHeads) {
  const int64_t batch = 2, heads = 6, tq = 5, tk = 7, d = 3, dv = 4;
  Buffer mask;
  mask.shape = {tq, tk};
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = 0; j < tk; ++j)
      mask.i.push_back(j > i + 2);
  for (auto [keyHeads, keyTransposed] : {std::pair<int64_t, bool>(2, false), {2, true}, {1, false}}) {
    SCOPED_TRACE(std::to_string(keyHeads) + " key heads" + (keyTransposed ? ", keys transposed" : ""));
    const int64_t group = heads / keyHeads, rows = keyTransposed ? d : tk, cols = keyTransposed ? tk : d;
    Buffer q = randomBuffer({batch, heads, tq, d}, 41), k = randomBuffer({batch, keyHeads, rows, cols}, 42),
           v = randomBuffer({batch, keyHeads, tk, dv}, 43), dout = randomBuffer({batch, heads, tq, dv}, 44);
    // Head h of the copy is head h / group of x: [batch, keyHeads, n] -> [batch, heads, n].
    auto repeated = [&](const Buffer &x) {
      const int64_t n = x.f.size() / (batch * keyHeads);
      Buffer copy = zeros({batch, heads, x.shape[2], x.shape[3]});
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < heads; ++h)
          std::copy_n(x.f.begin() + (b * keyHeads + h / group) * n, n, copy.f.begin() + (b * heads + h) * n);
      return copy;
    };
    auto summed = [&](const Buffer &copy) { // the gradient of repeated: each group's heads added
      const int64_t n = copy.f.size() / (batch * heads);
      std::vector<double> sum(batch * keyHeads * n, 0.0);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t e = 0; e < n; ++e)
            sum[(b * keyHeads + h / group) * n + e] += copy.f[(b * heads + h) * n + e];
      return sum;
    };
    Buffer kr = repeated(k), vr = repeated(v);
    plan::Instruction inst;
    (*inst.mutable_float_attrs())["scale"] = 0.6;
    (*inst.mutable_int_attrs())["key_transposed"] = keyTransposed;
    Buffer o = zeros({batch, heads, tq, dv}), lse = zeros({batch, heads, tq});
    ASSERT_TRUE(runKernel("attention", {&q, &kr, &vr, &mask}, {&o, &lse}, inst).isOk());
    Buffer gq = zeros(q.shape), gk = zeros(kr.shape), gv = zeros(vr.shape);
    ASSERT_TRUE(runKernel("attention_grad", {&q, &kr, &vr, &mask, &o, &lse, &dout}, {&gq, &gk, &gv}, inst).isOk());

    Buffer go = zeros(o.shape), glse = zeros(lse.shape);
    ASSERT_TRUE(runKernel("attention", {&q, &k, &v, &mask}, {&go, &glse}, inst).isOk());
    expectNear(go.f, std::vector<double>(o.f.begin(), o.f.end()), 1e-6);
    expectNear(glse.f, std::vector<double>(lse.f.begin(), lse.f.end()), 1e-6);
    Buffer ggq = zeros(q.shape), ggk = zeros(k.shape), ggv = zeros(v.shape);
    ASSERT_TRUE(runKernel("attention_grad", {&q, &k, &v, &mask, &go, &glse, &dout}, {&ggq, &ggk, &ggv}, inst).isOk());
    expectNear(ggq.f, std::vector<double>(gq.f.begin(), gq.f.end()), 1e-6);
    expectNear(ggk.f, summed(gk), 1e-5);
    expectNear(ggv.f, summed(gv), 1e-5);
  }
  // Key heads that do not divide the query's are refused.
  Buffer q = randomBuffer({1, 6, tq, d}, 45), k = randomBuffer({1, 4, tk, d}, 46), v = randomBuffer({1, 4, tk, dv}, 47);
  Buffer o = zeros({1, 6, tq, dv}), lse = zeros({1, 6, tq});
  plan::Instruction inst;
  (*inst.mutable_float_attrs())["scale"] = 0.6;
  EXPECT_FALSE(runKernel("attention", {&q, &k, &v, &mask}, {&o, &lse}, inst).isOk());
}

// token_major operands ([batch, t, heads, d], a projection viewed as heads)
// against attention on the same operands transposed to [batch, heads, t, d]
// (checked against the formulas above): the same outputs and gradients,
// each in its operand's layout. Every operand so, and only value and out
// (LLaMA's, whose rotary query and key are head-major), with grouped keys.
TEST(Kernels, TokenMajorOperandsEqualAttentionOnTransposedCopies) {
  const int64_t batch = 2, heads = 4, keyHeads = 2, tq = 5, tk = 7, d = 3, dv = 4;
  Buffer mask;
  mask.shape = {tq, tk};
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = 0; j < tk; ++j)
      mask.i.push_back(j > i + 2);
  // [batch, a, b, w] -> [batch, b, a, w]
  auto swapped = [](const Buffer &x) {
    const int64_t n = x.shape[0], a = x.shape[1], b = x.shape[2], w = x.shape[3];
    Buffer y = zeros({n, b, a, w});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < a; ++p)
        for (int64_t q = 0; q < b; ++q)
          for (int64_t c = 0; c < w; ++c)
            y.f[((i * b + q) * a + p) * w + c] = x.f[((i * a + p) * b + q) * w + c];
    return y;
  };
  auto asDouble = [](const Buffer &x) { return std::vector<double>(x.f.begin(), x.f.end()); };
  for (std::vector<int64_t> flags : {std::vector<int64_t>{1, 1, 1, 1}, {0, 0, 1, 1}}) {
    SCOPED_TRACE(flags[0] ? "every operand token-major" : "value and out token-major");
    Buffer q = randomBuffer({batch, heads, tq, d}, 51), k = randomBuffer({batch, keyHeads, tk, d}, 52),
           v = randomBuffer({batch, keyHeads, tk, dv}, 53), dout = randomBuffer({batch, heads, tq, dv}, 54);
    plan::Instruction inst;
    (*inst.mutable_float_attrs())["scale"] = 0.6;
    Buffer o = zeros({batch, heads, tq, dv}), lse = zeros({batch, heads, tq});
    ASSERT_TRUE(runKernel("attention", {&q, &k, &v, &mask}, {&o, &lse}, inst).isOk());
    Buffer gq = zeros(q.shape), gk = zeros(k.shape), gv = zeros(v.shape);
    ASSERT_TRUE(runKernel("attention_grad", {&q, &k, &v, &mask, &o, &lse, &dout}, {&gq, &gk, &gv}, inst).isOk());

    // The same in the flagged layouts.
    auto given = [&](const Buffer &x, int64_t flag) { return flag ? swapped(x) : x; };
    Buffer tq_ = given(q, flags[0]), tk_ = given(k, flags[1]), tv = given(v, flags[2]), tdout = given(dout, flags[3]);
    for (int64_t flag : flags)
      (*inst.mutable_int_list_attrs())["token_major"].add_values(flag);
    Buffer to = zeros(given(o, flags[3]).shape), tlse = zeros(lse.shape);
    ASSERT_TRUE(runKernel("attention", {&tq_, &tk_, &tv, &mask}, {&to, &tlse}, inst).isOk());
    expectNear(to.f, asDouble(given(o, flags[3])), 1e-6);
    expectNear(tlse.f, asDouble(lse), 1e-6);
    Buffer tgq = zeros(tq_.shape), tgk = zeros(tk_.shape), tgv = zeros(tv.shape);
    ASSERT_TRUE(
        runKernel("attention_grad", {&tq_, &tk_, &tv, &mask, &to, &tlse, &tdout}, {&tgq, &tgk, &tgv}, inst).isOk());
    expectNear(tgq.f, asDouble(given(gq, flags[0])), 1e-6);
    expectNear(tgk.f, asDouble(given(gk, flags[1])), 1e-6);
    expectNear(tgv.f, asDouble(given(gv, flags[2])), 1e-6);
  }
}

// packed_attention and its gradient against attention (checked against the
// formulas above) on q, k and v copied out of the packed buffer head by
// head: odd sizes, heads of 3 features, a causal mask over every head.
TEST(Kernels, PackedAttentionEqualsAttentionOnTheCopiedHeads) {
  const int64_t batch = 2, t = 5, heads = 3, d = 3, width = heads * d;
  Buffer qkv = randomBuffer({batch, t, 3 * width}, 31), dout = randomBuffer({batch, t, width}, 32);
  Buffer mask;
  mask.shape = {t, t};
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < t; ++j)
      mask.i.push_back(j > i);
  // [batch, t, part, heads, d] -> part's [batch, heads, t, d], and back.
  auto headsOf = [&](const Buffer &packed, int64_t part, int64_t parts) {
    Buffer out = zeros({batch, heads, t, d});
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < t; ++i)
          for (int64_t c = 0; c < d; ++c)
            out.f[((b * heads + h) * t + i) * d + c] = packed.f[(b * t + i) * parts * width + part * width + h * d + c];
    return out;
  };
  Buffer q = headsOf(qkv, 0, 3), k = headsOf(qkv, 1, 3), v = headsOf(qkv, 2, 3), doutHeads = headsOf(dout, 0, 1);
  plan::Instruction inst;
  (*inst.mutable_float_attrs())["scale"] = 0.6;
  Buffer o = zeros({batch, heads, t, d}), lse = zeros({batch, heads, t});
  ASSERT_TRUE(runKernel("attention", {&q, &k, &v, &mask}, {&o, &lse}, inst).isOk());
  Buffer gq = zeros(q.shape), gk = zeros(k.shape), gv = zeros(v.shape);
  ASSERT_TRUE(runKernel("attention_grad", {&q, &k, &v, &mask, &o, &lse, &doutHeads}, {&gq, &gk, &gv}, inst).isOk());

  (*inst.mutable_int_attrs())["heads"] = heads;
  Buffer po = zeros({batch, t, width}), plse = zeros({batch, heads, t});
  ASSERT_TRUE(runKernel("packed_attention", {&qkv, &mask}, {&po, &plse}, inst).isOk());
  expectNear(headsOf(po, 0, 1).f, std::vector<double>(o.f.begin(), o.f.end()), 1e-6);
  expectNear(plse.f, std::vector<double>(lse.f.begin(), lse.f.end()), 1e-6);
  Buffer dqkv = zeros(qkv.shape);
  ASSERT_TRUE(runKernel("packed_attention_grad", {&qkv, &mask, &po, &plse, &dout}, {&dqkv}, inst).isOk());
  const Buffer *grads[3] = {&gq, &gk, &gv};
  for (int64_t part = 0; part < 3; ++part)
    expectNear(headsOf(dqkv, part, 3).f, std::vector<double>(grads[part]->f.begin(), grads[part]->f.end()), 1e-6);
}

} // namespace
