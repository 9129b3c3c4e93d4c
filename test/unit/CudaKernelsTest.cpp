//===- CudaKernelsTest.cpp - every CUDA kernel against the CPU kernel -----===//
//
// For each kernel of the contract, random inputs of odd sizes (never a
// multiple of a block or tile) run through the CPU kernel and the CUDA
// kernel; the outputs must agree within the case's tolerance. bf16 cases
// feed the CPU kernel the same rounded inputs in f32 and compare with a
// bf16 tolerance. Data errors (a label or an index out of range) must reach
// the device error word.
//
// A plain program, not GoogleTest, so it builds on a GPU machine that has
// only the runtime's dependencies. Without a visible GPU it checks the
// kernel tables, prints why it skips and exits 77 (ctest: skipped).
//
//===----------------------------------------------------------------------===//
#include "../../runtime/lib/cpu/Indexing.h"
#include "../../runtime/lib/cuda/CudaKernels.h"
#include "fsdpc/runtime/CudaDevice.h"
#include "fsdpc/runtime/Float16.h"
#include "fsdpc/runtime/KernelContract.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace fsdpc;
using namespace fsdpc::runtime;

namespace {

int failures = 0;
int ran = 0; // runs of a case: one per kernel variant

#define CHECK_CUDA(expr)                                                                                               \
  do {                                                                                                                 \
    /* Not `error`: `expr` may name a variable of that name (the error word). */                                       \
    cudaError_t checkedStatus = (expr);                                                                                \
    if (checkedStatus != cudaSuccess) {                                                                                \
      std::printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(checkedStatus));               \
      std::exit(1);                                                                                                    \
    }                                                                                                                  \
  } while (0)

/// How a tensor's values are drawn.
struct Fill {
  enum Kind {
    kNormal,
    kNormalBf16,
    kPositive,
    kIntegers,
    kQuarters,
    kScaledNormal,
    kCausal,
    kConstant,
    kZeros,
    kSomeNaN,
    kOutOfInt64,
    kInt64Edges,
    kLeftPadded
  } kind = kNormal;
  double a = 0, b = 0; // kIntegers and kQuarters: [a, b); kConstant and kScaledNormal: a
};
Fill normal() { return {}; }
Fill normalBf16() { return {Fill::kNormalBf16}; } // normal, rounded to a bf16 value (stored as f32)
Fill positive() { return {Fill::kPositive}; }
Fill integers(int64_t lo, int64_t hi) { return {Fill::kIntegers, static_cast<double>(lo), static_cast<double>(hi)}; }
// Multiples of 1/4 in [lo, hi): exact halves, where rounding modes differ.
Fill quarters(int64_t lo, int64_t hi) { return {Fill::kQuarters, static_cast<double>(lo), static_cast<double>(hi)}; }
Fill scaledNormal(double scale) { return {Fill::kScaledNormal, scale}; }
Fill causal() { return {Fill::kCausal}; }
// A causal mask over left-padded sequences: each [tq, tk] matrix masks the
// keys after the query and its first (13 m + 5) mod tq keys (m counts the
// matrices), so its first queries see no key at all.
Fill leftPadded() { return {Fill::kLeftPadded}; }
Fill constant(double v) { return {Fill::kConstant, v}; }
Fill someNaN() { return {Fill::kSomeNaN}; } // normal, every third element NaN
Fill outOfInt64() { return {Fill::kOutOfInt64}; } // NaN, +-inf and normal x 1e19 in turn
// INT64_MIN, INT64_MAX, -1, 0, 1, 7 and -7 in turn along the last dimension
// if `alongRows`, else along the second to last.
Fill int64Edges(bool alongRows = true) { return {Fill::kInt64Edges, alongRows ? 0.0 : 1.0}; }

struct Spec {
  std::vector<int64_t> shape;
  plan::DType dtype = plan::F32;
  Fill fill;
  int aliasOf = -1; // an output written in place over this input
};

/// One kernel call to run on both backends.
struct Case {
  std::string kernel, label;
  std::vector<Spec> inputs, outputs;
  plan::Instruction inst;
  double tolerance = 1e-5; // |gpu - cpu| <= tolerance * (1 + |cpu|)
  /// Expected data error: the device error word must name the call.
  bool expectDataError = false;
  /// Every device operand starts one element past a 16-byte boundary, as a
  /// parameter's view inside a flat shard may: the kernels' unvectorised
  /// paths.
  bool misalignedOperands = false;
  /// The kernel gets this fraction of the scratch it asks for: a kernel
  /// that works in blocks sized by its scratch (a staged GEMM) then runs
  /// several, the last one shorter.
  int scratchDivisor = 1;
  /// The kernel is told the device has one multiprocessor, so that kernels
  /// sizing their grid by it launch few blocks, each taking several rows.
  bool oneMultiprocessor = false;

  explicit Case(std::string name, std::string what = "") : kernel(name), label(name + (what.empty() ? "" : " " + what)) {
    inst.set_op(kernel);
  }
  Case &in(std::vector<int64_t> shape, Fill fill = normal(), plan::DType dtype = plan::F32) {
    inputs.push_back({std::move(shape), dtype, fill});
    return *this;
  }
  Case &out(std::vector<int64_t> shape, plan::DType dtype = plan::F32) {
    outputs.push_back({std::move(shape), dtype, {Fill::kZeros}});
    return *this;
  }
  Case &inPlace(int input) {
    Spec s = inputs[input];
    s.aliasOf = input;
    outputs.push_back(s);
    return *this;
  }
  Case &attr(const std::string &name, int64_t value) {
    (*inst.mutable_int_attrs())[name] = value;
    return *this;
  }
  Case &attr(const std::string &name, double value) {
    (*inst.mutable_float_attrs())[name] = value;
    return *this;
  }
  Case &attr(const std::string &name, const std::string &value) {
    (*inst.mutable_string_attrs())[name] = value;
    return *this;
  }
  Case &attr(const std::string &name, const std::vector<int64_t> &value) {
    auto &list = (*inst.mutable_int_list_attrs())[name];
    for (int64_t v : value)
      list.add_values(v);
    return *this;
  }
  Case &tol(double t) {
    tolerance = t;
    return *this;
  }
  Case &dataError() {
    expectDataError = true;
    return *this;
  }
  Case &inBlocks(int divisor) {
    scratchDivisor = divisor;
    label += " in blocks";
    return *this;
  }
  Case &misaligned() {
    misalignedOperands = true;
    label += " misaligned";
    return *this;
  }
  Case &onOneMultiprocessor() {
    oneMultiprocessor = true;
    label += " on 1 multiprocessor";
    return *this;
  }
};

bool isNarrow(plan::DType dtype) { return dtype == plan::BF16 || dtype == plan::F16; }

/// A host tensor: its stored bytes (as the plan would hold them).
struct HostTensor {
  Spec spec;
  std::vector<uint8_t> bytes;
  int64_t count() const { return elementCount(spec.shape); }
};

HostTensor makeTensor(const Spec &spec, std::mt19937 &rng) {
  HostTensor t{spec, {}};
  const int64_t n = t.count();
  t.bytes.assign(n * dtypeSize(spec.dtype), 0);
  std::normal_distribution<float> gauss;
  std::uniform_real_distribution<float> uniform(0.5f, 2.0f);
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    switch (spec.fill.kind) {
    case Fill::kNormal:
      v = gauss(rng);
      break;
    case Fill::kNormalBf16:
      v = bf16ToFloat(floatToBf16(gauss(rng)));
      break;
    case Fill::kPositive:
      v = uniform(rng);
      break;
    case Fill::kIntegers:
      v = std::uniform_int_distribution<int64_t>(static_cast<int64_t>(spec.fill.a),
                                                 static_cast<int64_t>(spec.fill.b) - 1)(rng);
      break;
    case Fill::kQuarters:
      v = std::uniform_int_distribution<int64_t>(static_cast<int64_t>(spec.fill.a) * 4,
                                                 static_cast<int64_t>(spec.fill.b) * 4 - 1)(rng) /
          4.0;
      break;
    case Fill::kScaledNormal:
      v = gauss(rng) * spec.fill.a;
      break;
    case Fill::kCausal: {
      const int64_t cols = spec.shape.back();
      v = (i % cols) > ((i / cols) % spec.shape[spec.shape.size() - 2]);
      break;
    }
    case Fill::kLeftPadded: {
      const int64_t cols = spec.shape.back(), rows = spec.shape[spec.shape.size() - 2];
      const int64_t key = i % cols, query = (i / cols) % rows, padding = (13 * (i / (cols * rows)) + 5) % rows;
      v = key > query || key < padding;
      break;
    }
    case Fill::kConstant:
      v = spec.fill.a;
      break;
    case Fill::kZeros:
      v = 0;
      break;
    case Fill::kSomeNaN:
      v = i % 3 == 1 ? std::nan("") : gauss(rng);
      break;
    case Fill::kOutOfInt64: {
      const double cycle[] = {std::nan(""), INFINITY, -INFINITY, gauss(rng) * 1e19};
      v = cycle[i % 4];
      break;
    }
    case Fill::kInt64Edges:
      break; // stored below, exactly (a double cannot hold INT64_MAX)
    }
    TensorView view{t.bytes.data(), spec.dtype, spec.shape};
    if (spec.fill.kind == Fill::kInt64Edges) {
      const int64_t cycle[] = {INT64_MIN, INT64_MAX, -1, 0, 1, 7, -7};
      const int64_t cols = spec.shape.back(), at = spec.fill.a == 0 ? i % cols : i / cols;
      cpu::storeInteger(view, i, cycle[at % 7]);
      continue;
    }
    if (spec.dtype == plan::I64 || spec.dtype == plan::I32 || spec.dtype == plan::BOOL)
      cpu::storeInteger(view, i, static_cast<int64_t>(v));
    else
      cpu::storeFloat(view, i, static_cast<float>(v));
  }
  return t;
}

/// The tensor as the CPU kernels take it: narrow floats widened to f32.
HostTensor widened(const HostTensor &t) {
  if (!isNarrow(t.spec.dtype))
    return t;
  HostTensor w{t.spec, std::vector<uint8_t>(t.count() * sizeof(float))};
  w.spec.dtype = plan::F32;
  TensorView from{const_cast<uint8_t *>(t.bytes.data()), t.spec.dtype, t.spec.shape},
      to{w.bytes.data(), plan::F32, t.spec.shape};
  cpu::castElements(from, to);
  return w;
}

double valueAt(const HostTensor &t, int64_t i) {
  TensorView view{const_cast<uint8_t *>(t.bytes.data()), t.spec.dtype, t.spec.shape};
  if (t.spec.dtype == plan::I64 || t.spec.dtype == plan::I32 || t.spec.dtype == plan::BOOL)
    return static_cast<double>(cpu::loadInteger(view, i));
  return cpu::loadFloat(view, i);
}

/// `value` as a tensor of `dtype` stores it: the CPU kernel computed a
/// narrow output in f32, and the CPU backend rounds it when it stores it.
double storedAs(plan::DType dtype, double value) {
  if (dtype == plan::BF16)
    return bf16ToFloat(floatToBf16(static_cast<float>(value)));
  if (dtype == plan::F16)
    return halfToFloat(floatToHalf(static_cast<float>(value)));
  return value;
}

/// What the GPU side of a run needs besides the tensors.
struct GpuContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  cuda::DeviceError *error = nullptr;
  StepContext *context = nullptr; // on the device: {step 3, rank 1}, as the CPU call's
  int multiprocessors = 1;
};

/// Runs one case on both backends and compares every output; `once`: a
/// kernel without variants runs only once (for compute-sanitizer's slow runs).
void runCase(const Case &c, GpuContext &gpu, unsigned seed, bool once) {
  std::mt19937 rng(seed);
  std::vector<HostTensor> inputs;
  for (const Spec &s : c.inputs)
    inputs.push_back(makeTensor(s, rng));
  std::vector<HostTensor> outputs;
  for (const Spec &s : c.outputs)
    outputs.push_back(s.aliasOf >= 0 ? inputs[s.aliasOf] : makeTensor(s, rng));

  // CPU: widened copies; in-place outputs share their input's buffer.
  std::vector<HostTensor> cpuIn, cpuOut;
  for (const HostTensor &t : inputs)
    cpuIn.push_back(widened(t));
  for (size_t j = 0; j < outputs.size(); ++j)
    cpuOut.push_back(widened(outputs[j]));
  DecodedParams params = decodeParams(c.inst);
  StepContext context{3, 1};
  KernelCall cpuCall;
  cpuCall.instruction = &c.inst;
  cpuCall.params = &params;
  cpuCall.context = &context;
  for (HostTensor &t : cpuIn)
    cpuCall.inputs.push_back({t.bytes.data(), t.spec.dtype, t.spec.shape});
  for (size_t j = 0; j < cpuOut.size(); ++j) {
    const int alias = c.outputs[j].aliasOf;
    HostTensor &t = alias >= 0 ? cpuIn[alias] : cpuOut[j];
    cpuCall.outputs.push_back({t.bytes.data(), t.spec.dtype, t.spec.shape});
  }
  Status cpuStatus = lookupKernel(c.kernel)(cpuCall);

  // GPU: the stored bytes, narrow dtypes as they are.
  std::vector<void *> deviceIn, deviceOut, allocations;
  // Where the case asks, one element past the allocation's 16-byte aligned start.
  auto allocate = [&](const Spec &spec, size_t bytes) {
    void *p;
    const size_t shift = c.misalignedOperands ? dtypeSize(spec.dtype) : 0;
    CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 16) + shift));
    allocations.push_back(p);
    return static_cast<void *>(static_cast<char *>(p) + shift);
  };
  for (const HostTensor &t : inputs) {
    void *p = allocate(t.spec, t.bytes.size());
    CHECK_CUDA(cudaMemcpy(p, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice));
    deviceIn.push_back(p);
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    const int alias = c.outputs[j].aliasOf;
    if (alias >= 0) {
      deviceOut.push_back(deviceIn[alias]);
      continue;
    }
    void *p = allocate(outputs[j].spec, outputs[j].bytes.size());
    // Poisoned: every element must be written.
    CHECK_CUDA(cudaMemset(p, 0xff, std::max<size_t>(outputs[j].bytes.size(), 16)));
    deviceOut.push_back(p);
  }
  KernelCall gpuCall;
  gpuCall.instruction = &c.inst;
  gpuCall.params = &params;
  gpuCall.context = &context;
  for (size_t i = 0; i < inputs.size(); ++i)
    gpuCall.inputs.push_back({deviceIn[i], inputs[i].spec.dtype, inputs[i].spec.shape});
  for (size_t j = 0; j < outputs.size(); ++j)
    gpuCall.outputs.push_back({deviceOut[j], outputs[j].spec.dtype, outputs[j].spec.shape});
  cuda::CudaKernel kernel = cuda::lookupCudaKernel(c.kernel);
  cuda::CudaLaunch launch;
  launch.stream = gpu.stream;
  launch.error = gpu.error;
  launch.instruction = 41;
  launch.lt = gpu.lt;
  launch.workspace = gpu.workspace;
  launch.workspaceBytes = 32ull << 20;
  launch.multiprocessors = c.oneMultiprocessor ? 1 : gpu.multiprocessors;
  launch.context = gpu.context;
  launch.scratchBytes = kernel.scratch ? kernel.scratch(gpuCall) / c.scratchDivisor : 0;
  if (launch.scratchBytes)
    CHECK_CUDA(cudaMalloc(&launch.scratch, launch.scratchBytes));
  gpuCall.backend = &launch;

  // A kernel with variants (KernelVariants.h) runs each of them, pinned
  // through its launch cache: each must agree with the CPU, and with the
  // first bit for bit (they claim the same bits, so that a choice by timing
  // cannot change a result). The first case of such a kernel also runs
  // unpinned: the timing path, whose outputs must be right too. In-place
  // cases run once: a second run would read what the first wrote.
  // A kernel without variants runs twice unless `once`, the second time
  // compared bit for bit with the first: every kernel claims the same bits
  // every run (no atomics in a sum), and a race between threads, which the
  // CPU comparison's tolerance may let pass, shows as a difference. On the
  // emulator the second run has another order of blocks and threads.
  const bool inPlace = std::any_of(c.outputs.begin(), c.outputs.end(), [](const Spec &s) { return s.aliasOf >= 0; });
  const int variants = kernel.variants && !inPlace ? kernel.variants(gpuCall) : 1;
  static std::set<std::string> timedKernels;
  std::vector<int> runs; // variant indexes; -1 unpinned
  for (int v = 0; v < variants; ++v)
    runs.push_back(variants > 1 ? v : -1);
  if (variants > 1 && timedKernels.insert(c.kernel).second)
    runs.push_back(-1);
  if (variants == 1 && !inPlace && !c.expectDataError && !once)
    runs.push_back(-1);
  std::vector<HostTensor> firstRun;
  for (size_t run = 0; run < runs.size(); ++run) {
    const int variant = runs[run];
    launch.cache = variant >= 0 ? std::make_shared<cuda::VariantChoice>(cuda::VariantChoice{variant}) : nullptr;
    for (size_t j = 0; j < outputs.size(); ++j)
      if (c.outputs[j].aliasOf < 0) // poisoned: every element must be written
        CHECK_CUDA(cudaMemset(deviceOut[j], 0xff, std::max<size_t>(outputs[j].bytes.size(), 16)));
    CHECK_CUDA(cudaMemset(gpu.error, 0, sizeof(cuda::DeviceError)));
    Status gpuStatus = kernel.run(gpuCall);
    CHECK_CUDA(cudaStreamSynchronize(gpu.stream));
    cuda::DeviceError error{};
    CHECK_CUDA(cudaMemcpy(&error, gpu.error, sizeof(error), cudaMemcpyDeviceToHost));

    bool ok = true;
    std::string why;
    if (c.expectDataError) {
      ok = !cpuStatus.isOk() && gpuStatus.isOk() && error.instruction == 42;
      why = "expected the CPU kernel to fail and the device error word to name instruction 41; CPU: " +
            cpuStatus.toString() + ", error word " + std::to_string(error.instruction);
    } else if (!cpuStatus.isOk() || !gpuStatus.isOk() || error.instruction != 0) {
      ok = false;
      why = "CPU: " + cpuStatus.toString() + "; GPU: " + gpuStatus.toString() + "; error word " +
            std::to_string(error.instruction);
    }
    double worst = 0;
    std::vector<HostTensor> got;
    if (ok && !c.expectDataError) {
      for (size_t j = 0; j < outputs.size(); ++j) {
        got.push_back(outputs[j]);
        CHECK_CUDA(cudaMemcpy(got[j].bytes.data(), deviceOut[j], got[j].bytes.size(), cudaMemcpyDeviceToHost));
        const int alias = c.outputs[j].aliasOf;
        const HostTensor &want = alias >= 0 ? cpuIn[alias] : cpuOut[j];
        for (int64_t i = 0; i < got[j].count(); ++i) {
          const double g = valueAt(got[j], i), w = storedAs(outputs[j].spec.dtype, valueAt(want, i));
          // A NaN where the CPU has one is equal (floor of NaN); any other
          // NaN fails.
          const double excess = std::isnan(g) && std::isnan(w) ? 0 : std::fabs(g - w) / (1 + std::fabs(w));
          const double first = firstRun.empty() ? g : valueAt(firstRun[j], i);
          char line[256] = "";
          if (!(excess <= c.tolerance))
            std::snprintf(line, sizeof(line), "output %zu element %lld: gpu %.9g cpu %.9g", j,
                          static_cast<long long>(i), g, w);
          // +0 and -0 are equal: a product's sign of zero is not a result.
          else if (g != first && !(std::isnan(g) && std::isnan(first)))
            std::snprintf(line, sizeof(line), "output %zu element %lld: %.9g, the first %s %.9g", j,
                          static_cast<long long>(i), g, variants > 1 ? "variant's" : "run's", first);
          if (*line) {
            ok = false;
            why = line;
            break;
          }
          worst = std::max(worst, excess);
        }
        if (!ok)
          break;
      }
    }
    if (firstRun.empty())
      firstRun = got;
    const std::string label =
        c.label + (variant >= 0  ? " [variant " + std::to_string(variant + 1) + " of " + std::to_string(variants) + "]"
                   : variants > 1 ? " [timed]"
                   : run > 0      ? " [again]"
                                  : "");
    std::printf("%s %-44s worst %.2e (tolerance %.0e)%s%s\n", ok ? "PASS" : "FAIL", label.c_str(), worst,
                c.tolerance, ok ? "" : ": ", ok ? "" : why.c_str());
    failures += !ok;
    ++ran;
  }
  for (void *p : allocations)
    cudaFree(p);
  if (launch.scratch)
    cudaFree(launch.scratch);
}

std::vector<Case> cases() {
  using V = std::vector<int64_t>;
  std::vector<Case> all;
  // GEMMs: every transposition, a batched left side, the bias epilogue,
  // bf16 inputs with f32 accumulation.
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      all.push_back(Case("matmul", "ta=" + std::to_string(ta) + " tb=" + std::to_string(tb))
                        .in(ta ? V{53, 37} : V{37, 53})
                        .in(tb ? V{29, 53} : V{53, 29})
                        .out({37, 29})
                        .attr("transpose_a", int64_t(ta))
                        .attr("transpose_b", int64_t(tb)));
  all.push_back(Case("matmul", "batched lhs").in({3, 11, 53}).in({53, 29}).out({3, 11, 29}));
  all.push_back(Case("matmul", "bf16").in({37, 67}, normal(), plan::BF16).in({67, 45}, normal(), plan::BF16)
                    .out({37, 45}, plan::BF16).tol(1e-2));
  all.push_back(Case("matmul", "bf16 -> f32").in({37, 67}, normal(), plan::BF16).in({67, 45}, normal(), plan::BF16)
                    .out({37, 45}).tol(1e-5));
  // 16-bit GEMMs whose N or K is not a multiple of 8 (the cases above) are
  // staged with zeros padding them; here one that is not (an odd M), and the
  // staged forms of GPT-2's three logits GEMMs in blocks of C's rows: the
  // logits (N padded: B and C staged), the input gradient (K padded: A and
  // B staged) and the weight gradient (A stored transposed with rows of an
  // odd M, staged by blocks, its last block padded apart).
  all.push_back(Case("matmul", "bf16, 16-byte rows").in({37, 64}, normal(), plan::BF16)
                    .in({64, 48}, normal(), plan::BF16).out({37, 48}, plan::BF16).tol(1e-2));
  all.push_back(Case("matmul", "bf16 logits").in({300, 64}, normal(), plan::BF16).in({45, 64}, normal(), plan::BF16)
                    .out({300, 45}, plan::BF16).attr("transpose_b", int64_t(1)).tol(1e-2).inBlocks(5));
  all.push_back(Case("matmul", "bf16 logits' input gradient").in({300, 45}, normal(), plan::BF16)
                    .in({45, 64}, normal(), plan::BF16).out({300, 64}, plan::BF16).tol(1e-2).inBlocks(5));
  all.push_back(Case("matmul", "bf16 logits' weight gradient").in({136, 45}, normal(), plan::BF16)
                    .in({136, 64}, normal(), plan::BF16).out({45, 64}, plan::BF16).attr("transpose_a", int64_t(1))
                    .tol(1e-2).inBlocks(3));
  all.push_back(Case("matmul", "bf16 -> f32, A and B staged").in({67, 301}, normal(), plan::BF16)
                    .in({45, 67}, normal(), plan::BF16).out({301, 45}).attr("transpose_a", int64_t(1))
                    .attr("transpose_b", int64_t(1)).tol(1e-5).inBlocks(4));
  all.push_back(Case("matmul_bias").in({41, 23}).in({19, 23}).in({19}).out({41, 19}).attr("transpose_b", int64_t(1)));
  all.push_back(Case("matmul_bias", "bf16 staged").in({141, 24}, normal(), plan::BF16).in({24, 18}, normal(), plan::BF16)
                    .in({18}, normal(), plan::BF16).out({141, 18}, plan::BF16).tol(1e-2).inBlocks(3));
  all.push_back(Case("matmul_bias", "bf16").in({41, 24}, normal(), plan::BF16).in({24, 18}, normal(), plan::BF16)
                    .in({18}, normal(), plan::BF16).out({41, 18}, plan::BF16).tol(1e-2));
  // accumulate: a residual add (or a gradient sum) folded into the GEMM,
  // read as cuBLASLt's C with beta = 1: f32, bf16 with a bias, bf16 -> f32;
  // staged with C padded (the addend copied into C's padded block, several
  // blocks) and with only A and B padded (the addend read in place, block
  // by block).
  all.push_back(Case("matmul", "accumulate").in({41, 23}).in({23, 19}).in({41, 19}).out({41, 19})
                    .attr("accumulate", int64_t(1)));
  all.push_back(Case("matmul_bias", "bf16 accumulate").in({41, 24}, normal(), plan::BF16)
                    .in({24, 16}, normal(), plan::BF16).in({16}, normal(), plan::BF16).in({41, 16}, normal(), plan::BF16)
                    .out({41, 16}, plan::BF16).attr("accumulate", int64_t(1)).tol(1e-2));
  all.push_back(Case("matmul", "bf16 -> f32 accumulate").in({3, 37, 64}, normal(), plan::BF16)
                    .in({48, 64}, normal(), plan::BF16).in({3, 37, 48}).out({3, 37, 48}).attr("transpose_b", int64_t(1))
                    .attr("accumulate", int64_t(1)).tol(1e-5));
  all.push_back(Case("matmul_bias", "bf16 staged accumulate").in({141, 24}, normal(), plan::BF16)
                    .in({24, 18}, normal(), plan::BF16).in({18}, normal(), plan::BF16).in({141, 18}, normal(), plan::BF16)
                    .out({141, 18}, plan::BF16).attr("accumulate", int64_t(1)).tol(1e-2).inBlocks(3));
  all.push_back(Case("matmul", "bf16 A and B staged accumulate").in({141, 23}, normal(), plan::BF16)
                    .in({23, 32}, normal(), plan::BF16).in({141, 32}, normal(), plan::BF16).out({141, 32}, plan::BF16)
                    .attr("accumulate", int64_t(1)).tol(1e-2).inBlocks(3));
  // A weight gradient with its bias gradient (the rows of B summed): f32 and
  // bf16 through cuBLASLt's epilogue; a bf16 gradient beside an f32 weight
  // gradient, which the epilogue does not take, through the GEMM and a
  // separate reduction.
  all.push_back(Case("matmul_bias_grad").in({131, 45}).in({131, 77}).out({45, 77}).out({77})
                    .attr("transpose_a", int64_t(1)));
  all.push_back(Case("matmul_bias_grad", "bf16").in({131, 45}, normal(), plan::BF16)
                    .in({131, 77}, normal(), plan::BF16).out({45, 77}, plan::BF16).out({77}, plan::BF16)
                    .attr("transpose_a", int64_t(1)).tol(1e-2));
  all.push_back(Case("matmul_bias_grad", "bf16, f32 weight gradient").in({131, 45}, normal(), plan::BF16)
                    .in({131, 77}, normal(), plan::BF16).out({45, 77}).out({77}, plan::BF16)
                    .attr("transpose_a", int64_t(1)).tol(1e-2));
  all.push_back(Case("matmul_bias_grad", "not transposed").in({45, 131}).in({131, 77}).out({45, 77}).out({77}));
  // The bias gradient of A's rows (dY^T X, a weight stored [out, in]):
  // cuBLASLt's BGRADB epilogue, or the GEMM and a separate reduction.
  all.push_back(Case("matmul_bias_grad", "of A").in({131, 45}).in({131, 77}).out({45, 77}).out({45})
                    .attr("transpose_a", int64_t(1)).attr("bias_grad_of_a", int64_t(1)));
  all.push_back(Case("matmul_bias_grad", "of A, bf16").in({131, 45}, normal(), plan::BF16)
                    .in({131, 77}, normal(), plan::BF16).out({45, 77}, plan::BF16).out({45}, plan::BF16)
                    .attr("transpose_a", int64_t(1)).attr("bias_grad_of_a", int64_t(1)).tol(1e-2));
  all.push_back(Case("batch_matmul").in({3, 5, 37, 19}).in({3, 5, 19, 23}).out({3, 5, 37, 23}));
  all.push_back(Case("batch_matmul", "tb, shared rhs").in({4, 37, 19}).in({1, 23, 19}).out({4, 37, 23})
                    .attr("transpose_b", int64_t(1)));
  // Elementwise, with broadcasting and in bf16.
  for (const char *op : {"add", "sub", "mul", "div"}) {
    all.push_back(Case(op, "broadcast").in({4, 1, 37}).in({5, 1}).out({4, 5, 37}));
    all.push_back(Case(op, "scalar").in({1001}).in({1}).out({1001}));
  }
  all.push_back(Case("add", "bf16").in({999}, normal(), plan::BF16).in({999}, normal(), plan::BF16)
                    .out({999}, plan::BF16).tol(1e-2));
  // A last dimension that is a multiple of 8 and not broadcast: 8 elements
  // per access from every operand (rotary embeddings' cos and sin over
  // heads, a mask over heads and queries, a scalar, a broadcast first
  // operand); broadcast along it, or misaligned, one at a time.
  all.push_back(Case("mul", "bf16 broadcast over heads").in({3, 5, 7, 24}, normal(), plan::BF16)
                    .in({3, 1, 7, 24}, normal(), plan::BF16).out({3, 5, 7, 24}, plan::BF16).tol(1e-2));
  all.push_back(Case("mul", "bf16 broadcast over heads").in({3, 5, 7, 24}, normal(), plan::BF16)
                    .in({3, 1, 7, 24}, normal(), plan::BF16).out({3, 5, 7, 24}, plan::BF16).tol(1e-2).misaligned());
  all.push_back(Case("add", "mask over heads and queries").in({2, 3, 5, 16}).in({2, 1, 1, 16}).out({2, 3, 5, 16}));
  all.push_back(Case("div", "by a scalar, rows of 40").in({3, 40}).in({1}).out({3, 40}));
  all.push_back(Case("sub", "broadcast first operand").in({7, 16}).in({4, 7, 16}).out({4, 7, 16}));
  all.push_back(Case("add", "broadcast along the last dimension").in({4, 5, 1}).in({4, 5, 16}).out({4, 5, 16}));
  // The operands read at the output's index go 8 elements per access when
  // 16-byte aligned (the cases above: 999 and 1001 elements leave a tail),
  // one at a time otherwise; under 8 elements, the tail is everything.
  all.push_back(Case("add", "bf16").in({999}, normal(), plan::BF16).in({999}, normal(), plan::BF16)
                    .out({999}, plan::BF16).tol(1e-2).misaligned());
  all.push_back(Case("mul", "bf16 in place").in({1003}, normal(), plan::BF16).in({1003}, normal(), plan::BF16)
                    .inPlace(0).tol(1e-2));
  all.push_back(Case("sub", "f16").in({1003}, normal(), plan::F16).in({1003}, normal(), plan::F16)
                    .out({1003}, plan::F16).tol(1e-3));
  all.push_back(Case("add", "5 elements").in({5}).in({5}).out({5}));
  // i64 arithmetic (positions, the last token's index): broadcasting, with
  // zero and negative divisors, and every pair of the values where two's
  // complement wraps (INT64_MIN / -1, INT64_MAX + 1, ...).
  for (const char *op : {"add", "sub", "mul", "div"}) {
    all.push_back(Case(op, "i64 broadcast").in({5, 1, 37}, integers(-50, 50), plan::I64)
                      .in({3, 37}, integers(-9, 10), plan::I64).out({5, 3, 37}, plan::I64).tol(0));
    all.push_back(Case(op, "i64 edges").in({11, 7}, int64Edges(), plan::I64).in({11, 1}, int64Edges(false), plan::I64)
                      .out({11, 7}, plan::I64).tol(0));
  }
  all.push_back(Case("gelu", "bf16").in({4099}, normal(), plan::BF16).out({4099}, plan::BF16).tol(1e-2));
  all.push_back(Case("gelu", "bf16").in({4099}, normal(), plan::BF16).out({4099}, plan::BF16).tol(1e-2).misaligned());
  all.push_back(Case("gelu_grad", "bf16").in({4099}, normal(), plan::BF16).in({4099}, normal(), plan::BF16)
                    .out({4099}, plan::BF16).tol(1e-2));
  all.push_back(Case("gelu_grad", "bf16").in({4099}, normal(), plan::BF16).in({4099}, normal(), plan::BF16)
                    .out({4099}, plan::BF16).tol(1e-2).misaligned());
  // Enough vectors for several turns of the grid-stride loop (the emulated
  // GPU has 3 multiprocessors: 48 blocks), the last turn partly filled, in
  // each variant (1, 2 or 4 vectors a thread at a time). Only calls of
  // that size have variants: below a turn of the grid they do not differ.
  all.push_back(Case("gelu_grad", "bf16, several grid turns").in({400003}, normal(), plan::BF16)
                    .in({400003}, normal(), plan::BF16).out({400003}, plan::BF16).tol(1e-2));
  all.push_back(Case("cast", "f32 -> bf16, several grid turns").in({400003}).out({400003}, plan::BF16).tol(0));
  // In place, the variants are not timed (each timed run would multiply
  // again): the call keeps the first.
  all.push_back(Case("mul", "bf16 in place, several grid turns").in({400003}, normal(), plan::BF16)
                    .in({400003}, normal(), plan::BF16).inPlace(0).tol(1e-2));
  all.push_back(Case("cast", "f32 -> bf16").in({1111}).out({1111}, plan::BF16).tol(0).misaligned());
  all.push_back(Case("cast", "bf16 -> f32").in({1111}, normal(), plan::BF16).out({1111}).tol(0).misaligned());
  all.push_back(Case("cast", "f16 -> bf16").in({1111}, normal(), plan::F16).out({1111}, plan::BF16).tol(0));
  all.push_back(Case("pow").in({3, 333}, positive()).in({1}, constant(3.0)).out({3, 333}).tol(1e-5));
  all.push_back(Case("pow", "fractional").in({777}, positive()).in({777}, positive()).out({777}).tol(1e-5));
  for (const char *op : {"neg", "exp", "erf", "relu", "tanh", "sigmoid"})
    all.push_back(Case(op).in({3, 677}).out({3, 677}).tol(2e-6));
  for (const char *op : {"log", "sqrt", "reciprocal"})
    all.push_back(Case(op).in({2031}, positive()).out({2031}).tol(2e-6));
  // Angles up to a few thousand radians, as rotary tables hold: both sides
  // reduce the argument exactly, so they stay within an ulp of 1.
  for (const char *op : {"sin", "cos"}) {
    all.push_back(Case(op).in({3, 677}).out({3, 677}).tol(2e-6));
    all.push_back(Case(op, "wide angles").in({2039}, scaledNormal(2000)).out({2039}).tol(2e-6));
  }
  all.push_back(Case("atan").in({2039}, scaledNormal(10)).out({2039}).tol(2e-6));
  for (const char *op : {"floor", "ceil", "round"}) {
    all.push_back(Case(op).in({3, 677}, scaledNormal(100)).out({3, 677}).tol(0));
    all.push_back(Case(op, "halves").in({2039}, quarters(-6, 6)).out({2039}).tol(0));
    all.push_back(Case(op, "NaN").in({7, 53}, someNaN()).out({7, 53}).tol(0));
  }
  all.push_back(Case("scale").in({1037}).out({1037}).attr("factor", 0.37));
  for (const char *op : {"relu_grad", "tanh_grad", "sigmoid_grad"})
    all.push_back(Case(op).in({1531}).in({1531}).out({1531}).tol(2e-6));
  all.push_back(Case("gelu").in({4099}).out({4099}).tol(1e-6));
  all.push_back(Case("gelu", "tanh").in({4099}).out({4099}).attr("approximate", std::string("tanh")).tol(1e-6));
  all.push_back(Case("gelu_grad").in({4099}).in({4099}).out({4099}).tol(1e-6));
  // 1 + tanh cancels where tanh is near -1: an ulp of tanh (CUDA's tanhf
  // against the CPU's vectorised tanh) times a |dy| of up to 4 leaves the
  // result a few ulps of 1 apart; on the H200 once 1.1e-6.
  all.push_back(Case("gelu_grad", "tanh").in({4099}).in({4099}).out({4099})
                    .attr("approximate", std::string("tanh")).tol(4e-6));
  // Gated activations (SwiGLU, GeGLU): forward and both gradients, f32 on an
  // odd count (single elements), bf16 on 16-byte multiples (8 a thread,
  // the forward's variants) and misaligned.
  for (const char *activation : {"silu", "gelu", "gelu_tanh"}) {
    const std::string kind(activation);
    all.push_back(Case("gated_activation", kind).in({3, 1367}).in({3, 1367}).out({3, 1367})
                      .attr("activation", kind).tol(4e-6));
    all.push_back(Case("gated_activation_grad", kind).in({3, 1367}).in({3, 1367}).in({3, 1367})
                      .out({3, 1367}).out({3, 1367}).attr("activation", kind).tol(4e-6));
    all.push_back(Case("gated_activation", kind + ", bf16").in({37, 136}, normal(), plan::BF16)
                      .in({37, 136}, normal(), plan::BF16).out({37, 136}, plan::BF16).attr("activation", kind)
                      .tol(1e-2));
    all.push_back(Case("gated_activation_grad", kind + ", bf16").in({37, 136}, normal(), plan::BF16)
                      .in({37, 136}, normal(), plan::BF16).in({37, 136}, normal(), plan::BF16)
                      .out({37, 136}, plan::BF16).out({37, 136}, plan::BF16).attr("activation", kind).tol(1e-2));
    all.push_back(Case("gated_activation", kind + ", bf16").in({4099}, normal(), plan::BF16)
                      .in({4099}, normal(), plan::BF16).out({4099}, plan::BF16).attr("activation", kind).tol(1e-2)
                      .misaligned());
    all.push_back(Case("gated_activation_grad", kind + ", bf16").in({4099}, normal(), plan::BF16)
                      .in({4099}, normal(), plan::BF16).in({4099}, normal(), plan::BF16).out({4099}, plan::BF16)
                      .out({4099}, plan::BF16).attr("activation", kind).tol(1e-2).misaligned());
  }
  // Rotary embeddings: each product rounded before the sum on both sides,
  // so the bits agree. Token-major [B, T, H, D] with cos and sin over heads
  // (an odd half: a pair a thread), head-major over heads and batch, and
  // bf16 with a half of 8 and 16 (8 pairs a thread), misaligned (a pair a
  // thread) and in place.
  for (const char *op : {"rotary", "rotary_grad"}) {
    all.push_back(
        Case(op, "token-major, half 3").in({3, 7, 5, 6}).in({3, 7, 1, 6}).in({3, 7, 1, 6}).out({3, 7, 5, 6}).tol(0));
    all.push_back(Case(op, "head-major, tables over batch and heads")
                      .in({2, 3, 7, 10})
                      .in({1, 1, 7, 10})
                      .in({1, 1, 7, 10})
                      .out({2, 3, 7, 10})
                      .tol(0));
    for (int64_t width : {16, 32}) {
      const std::string what = "bf16, half " + std::to_string(width / 2);
      all.push_back(Case(op, what)
                        .in({3, 7, 5, width}, normal(), plan::BF16)
                        .in({3, 7, 1, width}, normal(), plan::BF16)
                        .in({3, 7, 1, width}, normal(), plan::BF16)
                        .out({3, 7, 5, width}, plan::BF16)
                        .tol(0));
      all.push_back(Case(op, what)
                        .in({3, 7, 5, width}, normal(), plan::BF16)
                        .in({3, 7, 1, width}, normal(), plan::BF16)
                        .in({3, 7, 1, width}, normal(), plan::BF16)
                        .out({3, 7, 5, width}, plan::BF16)
                        .tol(0)
                        .misaligned());
    }
    all.push_back(Case(op, "bf16 in place")
                      .in({2, 9, 3, 64}, normal(), plan::BF16)
                      .in({2, 9, 1, 64}, normal(), plan::BF16)
                      .in({2, 9, 1, 64}, normal(), plan::BF16)
                      .inPlace(0)
                      .tol(0));
  }
  all.push_back(Case("select").in({5, 1}, integers(0, 2), plan::I64).in({5, 37}).in({37}).out({5, 37}));
  all.push_back(Case("is_nan").in({7, 53}, someNaN()).out({7, 53}, plan::I64).tol(0));
  // Small integers, so that equal operands are common; NaN against NaN.
  for (const char *predicate : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    all.push_back(Case("compare", predicate)
                      .in({7, 53}, integers(-2, 3))
                      .in({53}, integers(-2, 3))
                      .out({7, 53}, plan::I64)
                      .attr("predicate", std::string(predicate))
                      .tol(0));
    all.push_back(Case("compare", std::string(predicate) + " NaN bf16")
                      .in({5, 1, 37}, someNaN(), plan::BF16)
                      .in({3, 37}, someNaN(), plan::BF16)
                      .out({5, 3, 37}, plan::I64)
                      .attr("predicate", std::string(predicate))
                      .tol(0));
  }
  all.push_back(Case("compare", "i64")
                    .in({7, 53}, integers(-2, 3), plan::I64)
                    .in({7, 1}, integers(-2, 3), plan::I64)
                    .out({7, 53}, plan::I64)
                    .attr("predicate", std::string("le"))
                    .tol(0));
  all.push_back(Case("is_nan", "bf16").in({7, 53}, someNaN(), plan::BF16).out({7, 53}, plan::I64).tol(0));
  all.push_back(Case("cast", "f32 -> bf16").in({1111}).out({1111}, plan::BF16).tol(0));
  all.push_back(Case("cast", "bf16 -> f32").in({1111}, normal(), plan::BF16).out({1111}).tol(0));
  all.push_back(Case("cast", "i64 -> f32").in({333}, integers(-50, 50), plan::I64).out({333}).tol(0));
  all.push_back(Case("cast", "f32 -> i64").in({333}).out({333}, plan::I64).tol(0));
  all.push_back(Case("cast", "f32 -> i64 outside int64").in({333}, outOfInt64()).out({333}, plan::I64).tol(0));
  all.push_back(Case("cast", "to_bool").in({333}, integers(-2, 3), plan::I64).out({333}, plan::I64)
                    .attr("to_bool", int64_t(1)).tol(0));
  all.push_back(Case("dropout").in({3, 1001}).out({3, 1001}).attr("ratio", 0.3).attr("seed", int64_t(7)).tol(0));
  all.push_back(Case("dropout_grad").in({3, 1001}).out({3, 1001}).attr("ratio", 0.3).attr("seed", int64_t(7)).tol(0));
  all.push_back(Case("fill").out({3, 77}).attr("value", -1.5).tol(0));
  // Reductions, in double on both sides.
  all.push_back(Case("reduce_sum", "last").in({7, 9, 301}).out({7, 9}).attr("axes", V{2}).attr("keepdims", int64_t(0)));
  all.push_back(Case("reduce_sum", "leading (columns)").in({1025, 37}).out({37}).attr("axes", V{0})
                    .attr("keepdims", int64_t(0)));
  all.push_back(Case("reduce_sum", "middle").in({5, 301, 7}).out({5, 1, 7}).attr("axes", V{1})
                    .attr("keepdims", int64_t(1)));
  // The CPU kernel adds the 1029 rows in f32 (partial sums up to about 30,
  // an ulp of 2e-6 each), the CUDA one in f64: a few ulps apart.
  all.push_back(Case("sum_to", "bias gradient").in({3, 343, 29}).out({29}).tol(5e-5));
  all.push_back(Case("sum_to", "inner broadcast").in({7, 13, 5}).out({7, 1, 5}));
  // More chunks of rows (64 rows each) than lanes adding them (32). The CPU
  // kernel adds the 4099 rows in f32 (partial sums near 64, an ulp of 8e-6
  // each), the CUDA one in f64.
  all.push_back(Case("sum_to", "4099 rows").in({4099, 37}).out({37}).tol(1e-4));
  all.push_back(Case("broadcast_to").in({1, 37}).out({5, 37}).tol(0));
  all.push_back(Case("broadcast_to", "i64").in({5, 1}, integers(0, 100), plan::I64).out({5, 3}, plan::I64).tol(0));
  // Shape and indexing.
  all.push_back(Case("concat").in({3, 5, 7}).in({3, 2, 7}).out({3, 7, 7}).attr("axis", int64_t(1)).tol(0));
  all.push_back(Case("slice").in({9, 31}).out({3, 10}).attr("starts", V{1, 2}).attr("steps", V{3, 3}).tol(0));
  all.push_back(Case("slice_grad").in({3, 10}).out({9, 31}).attr("starts", V{1, 2}).attr("steps", V{3, 3}).tol(0));
  all.push_back(Case("gather", "embedding").in({1001, 37}).in({5, 13}, integers(-1001, 1001), plan::I64)
                    .out({5, 13, 37}).attr("axis", int64_t(0)).tol(0));
  all.push_back(Case("gather", "index out of range").in({11, 7}).in({5}, integers(11, 12), plan::I64)
                    .out({5, 7}).attr("axis", int64_t(0)).dataError());
  // The embedding's gradient adds each row's positions in ascending order
  // in f32, as the CPU kernel does: the same bits (tolerance 0), with
  // repeated and negative indices, rows no index names, a gather along a
  // middle axis, and a run of hundreds of positions for one row.
  all.push_back(Case("gather_grad").in({5, 13, 37}).in({5, 13}, integers(0, 17), plan::I64).out({17, 37})
                    .attr("axis", int64_t(0)).tol(0));
  all.push_back(Case("gather_grad", "bf16").in({5, 13, 37}, normal(), plan::BF16).in({5, 13}, integers(0, 17), plan::I64)
                    .out({17, 37}, plan::BF16).attr("axis", int64_t(0)).tol(0));
  all.push_back(Case("gather_grad", "negative indices, rows unnamed").in({4, 75, 24})
                    .in({4, 75}, integers(-1001, 1001), plan::I64).out({1001, 24}).attr("axis", int64_t(0)).tol(0));
  all.push_back(Case("gather_grad", "middle axis").in({3, 7, 5}).in({7}, integers(-17, 17), plan::I64)
                    .out({3, 17, 5}).attr("axis", int64_t(1)).tol(0));
  all.push_back(Case("gather_grad", "bf16, long runs").in({2, 400, 40}, normal(), plan::BF16)
                    .in({2, 400}, integers(0, 3), plan::I64).out({3, 40}, plan::BF16).attr("axis", int64_t(0)).tol(0));
  all.push_back(Case("one_hot").in({7, 13}, integers(-1, 37), plan::I64).out({7, 13, 37})
                    .attr("ignore_index", int64_t(-1)).tol(0));
  all.push_back(Case("one_hot", "label out of range").in({5}, integers(11, 12), plan::I64).out({5, 11}).dataError());
  for (const char *op : {"arg_max", "arg_min"}) {
    all.push_back(Case(op, "middle axis").in({3, 37, 5}).out({3, 1, 5}, plan::I64).attr("axis", int64_t(1)).tol(0));
    all.push_back(Case(op, "ties, last index").in({7, 33}, integers(0, 3)).out({7, 1}, plan::I64)
                      .attr("axis", int64_t(1)).attr("select_last_index", int64_t(1)).tol(0));
    all.push_back(Case(op, "NaN").in({31, 9}, someNaN()).out({1, 9}, plan::I64).attr("axis", int64_t(0)).tol(0));
    all.push_back(Case(op, "i64 ties").in({7, 33}, integers(0, 3), plan::I64).out({7, 1}, plan::I64)
                      .attr("axis", int64_t(1)).tol(0));
    all.push_back(Case(op, "i64 edges, last index").in({3, 29, 7}, int64Edges(false), plan::I64)
                      .out({3, 1, 7}, plan::I64).attr("axis", int64_t(1)).attr("select_last_index", int64_t(1)).tol(0));
  }
  all.push_back(Case("trilu").in({3, 19, 23}).out({3, 19, 23}).attr("k", int64_t(1)).attr("upper", int64_t(0)).tol(0));
  all.push_back(Case("transpose").in({3, 5, 7, 11}).out({7, 3, 11, 5}).attr("perm", V{2, 0, 3, 1}).tol(0));
  all.push_back(Case("transpose", "i64").in({3, 5, 7}, int64Edges(), plan::I64).out({7, 3, 5}, plan::I64)
                    .attr("perm", V{2, 0, 1}).tol(0));
  all.push_back(Case("copy").in({3, 333}).out({3, 333}).tol(0));
  // Softmax family.
  all.push_back(Case("softmax").in({33, 1027}).out({33, 1027}).attr("axis", int64_t(-1)).tol(1e-5));
  all.push_back(Case("softmax", "middle axis").in({3, 37, 5}).out({3, 37, 5}).attr("axis", int64_t(1)).tol(1e-5));
  all.push_back(Case("log_softmax").in({33, 1027}).out({33, 1027}).attr("axis", int64_t(1)).tol(1e-5));
  all.push_back(Case("softmax_grad").in({33, 517}).in({33, 517}).out({33, 517}).attr("axis", int64_t(-1)).tol(1e-5));
  all.push_back(Case("log_softmax_grad").in({3, 37, 5}).in({3, 37, 5}).out({3, 37, 5}).attr("axis", int64_t(1))
                    .tol(1e-5));
  all.push_back(Case("masked_softmax").in({2, 3, 37, 41}).in({37, 41}, causal(), plan::I64).out({2, 3, 37, 41})
                    .attr("scale", 0.125).tol(1e-5));
  // Every key masked (a left-padded query under a causal mask): zeros.
  all.push_back(Case("masked_softmax", "every key masked").in({2, 3, 7, 41}).in({7, 41}, integers(1, 2), plan::I64)
                    .out({2, 3, 7, 41}).attr("scale", 0.125).tol(0));
  // Attention: a causal mask, odd lengths, both key layouts, head sizes in
  // each accumulator width.
  for (int64_t d : {64, 80, 40}) {
    for (int kt = 0; kt < 2; ++kt) {
      const int64_t tq = 67, tk = 67;
      const std::string what = "d=" + std::to_string(d) + (kt ? " key transposed" : "");
      const V key = kt ? V{2, 3, d, tk} : V{2, 3, tk, d};
      all.push_back(Case("attention", what).in({2, 3, tq, d}).in(key).in({2, 3, tk, d}).in({tq, tk}, causal(), plan::I64)
                        .out({2, 3, tq, d}).out({2, 3, tq}).attr("scale", 1.0 / std::sqrt(double(d)))
                        .attr("key_transposed", int64_t(kt)).tol(2e-5));
      all.push_back(Case("attention_grad", what).in({2, 3, tq, d}).in(key).in({2, 3, tk, d})
                        .in({tq, tk}, causal(), plan::I64).in({2, 3, tq, d}).in({2, 3, tq}, constant(3.0))
                        .in({2, 3, tq, d}).out({2, 3, tq, d}).out(key).out({2, 3, tk, d})
                        .attr("scale", 1.0 / std::sqrt(double(d))).attr("key_transposed", int64_t(kt)).tol(5e-5));
    }
  }
  // Mixed-precision attention (compute_dtype bf16: tensor cores on the GPU,
  // f32 on the CPU). The f32 inputs hold bf16 values, so both sides see the
  // operands the tensor cores see; what is left is the rounding of P and dS
  // to bf16 (measured on the emulator: up to 3e-3 forward, 1.6e-2 backward;
  // a wrong index or mask is off by O(1)). From f32 inputs the gap is the
  // inputs' rounding, amplified where dS = P (dP - delta) cancels: a double
  // reference with the same roundings matched the tensor-core dQ within
  // 1e-3 where it was 0.15 from the f32 CPU.
  for (int64_t d : {64, 32, 128}) {
    for (int kt = 0; kt < 2; ++kt) {
      for (auto [tq, tk] : {std::pair<int64_t, int64_t>{67, 67}, {45, 131}}) {
        const std::string what = "bf16 d=" + std::to_string(d) + " " + std::to_string(tq) + "x" +
                                 std::to_string(tk) + (kt ? " key transposed" : "");
        const V key = kt ? V{2, 3, d, tk} : V{2, 3, tk, d};
        const Fill b = normalBf16();
        all.push_back(Case("attention", what).in({2, 3, tq, d}, b).in(key, b).in({2, 3, tk, d}, b)
                          .in({tq, tk}, causal(), plan::I64).out({2, 3, tq, d}).out({2, 3, tq})
                          .attr("scale", 1.0 / std::sqrt(double(d))).attr("key_transposed", int64_t(kt))
                          .attr("compute_dtype", std::string("bf16")).tol(1e-2));
        all.push_back(Case("attention_grad", what).in({2, 3, tq, d}, b).in(key, b).in({2, 3, tk, d}, b)
                          .in({tq, tk}, causal(), plan::I64).in({2, 3, tq, d}, b).in({2, 3, tq}, constant(3.0))
                          .in({2, 3, tq, d}, b).out({2, 3, tq, d}).out(key).out({2, 3, tk, d})
                          .attr("scale", 1.0 / std::sqrt(double(d))).attr("key_transposed", int64_t(kt))
                          .attr("compute_dtype", std::string("bf16")).tol(3e-2));
      }
    }
  }
  // Soft-capped scores (Gemma 2): c tanh(scale q.k / c) with c = 2 against
  // scores of about N(0, 1), so that the cap bends most of them; the f32
  // kernels and the tensor-core ones at each head size, causal by index or
  // by the mask, and the packed form.
  struct Capped {
    bool bf16;
    int64_t d, tq, tk;
    bool causalByIndex;
  };
  for (Capped c : {Capped{false, 64, 67, 67, true}, Capped{false, 80, 45, 131, false}, Capped{true, 64, 67, 67, true},
                   Capped{true, 32, 45, 131, false}, Capped{true, 128, 67, 67, false}}) {
    const std::string what = std::string(c.bf16 ? "bf16 " : "") + "softcap d=" + std::to_string(c.d) + " " +
                             std::to_string(c.tq) + "x" + std::to_string(c.tk);
    const Fill f = c.bf16 ? normalBf16() : normal();
    const std::string compute = c.bf16 ? "bf16" : "f32";
    const double scale = 1.0 / std::sqrt(double(c.d)), tolerance = c.bf16 ? 1e-2 : 2e-5,
                 gradTolerance = c.bf16 ? 3e-2 : 5e-5;
    const int64_t d = c.d, tq = c.tq, tk = c.tk;
    all.push_back(Case("attention", what)
                      .in({2, 3, tq, d}, f)
                      .in({2, 3, tk, d}, f)
                      .in({2, 3, tk, d}, f)
                      .in({tq, tk}, causal(), plan::I64)
                      .out({2, 3, tq, d})
                      .out({2, 3, tq})
                      .attr("scale", scale)
                      .attr("softcap", 2.0)
                      .attr("causal", int64_t(c.causalByIndex))
                      .attr("compute_dtype", compute)
                      .tol(tolerance));
    all.push_back(Case("attention_grad", what)
                      .in({2, 3, tq, d}, f)
                      .in({2, 3, tk, d}, f)
                      .in({2, 3, tk, d}, f)
                      .in({tq, tk}, causal(), plan::I64)
                      .in({2, 3, tq, d}, f)
                      .in({2, 3, tq}, constant(3.0))
                      .in({2, 3, tq, d}, f)
                      .out({2, 3, tq, d})
                      .out({2, 3, tk, d})
                      .out({2, 3, tk, d})
                      .attr("scale", scale)
                      .attr("softcap", 2.0)
                      .attr("causal", int64_t(c.causalByIndex))
                      .attr("compute_dtype", compute)
                      .tol(gradTolerance));
    if (c.tq != c.tk || !c.causalByIndex)
      continue;
    const int64_t heads = 2, width = heads * d;
    all.push_back(Case("packed_attention", what)
                      .in({2, tq, 3 * width}, f)
                      .in({tq, tq}, causal(), plan::I64)
                      .out({2, tq, width})
                      .out({2, heads, tq})
                      .attr("heads", heads)
                      .attr("scale", scale)
                      .attr("softcap", 2.0)
                      .attr("compute_dtype", compute)
                      .attr("causal", int64_t(1))
                      .tol(tolerance));
    all.push_back(Case("packed_attention_grad", what)
                      .in({2, tq, 3 * width}, f)
                      .in({tq, tq}, causal(), plan::I64)
                      .in({2, tq, width}, f)
                      .in({2, heads, tq}, constant(3.0))
                      .in({2, tq, width}, f)
                      .out({2, tq, 3 * width})
                      .attr("heads", heads)
                      .attr("scale", scale)
                      .attr("softcap", 2.0)
                      .attr("compute_dtype", compute)
                      .attr("causal", int64_t(1))
                      .tol(gradTolerance));
  }
  // Left-padded batches under a causal mask, broadcast over the heads: the
  // padding's queries see no key and get output 0 and the largest float as
  // logsumexp (the CPU kernel's rule); their gradients are 0 whatever logsumexp is given.
  // With mask_covers_causal (the lowering's hint for transformers' run-time
  // masks) the kernels leave out the keys after each query unread and skip
  // the tiles wholly after a block's queries; the CPU reads the mask.
  for (auto [bf16, covers, t] : {std::tuple(false, false, 67), {true, false, 67}, {false, true, 67},
                                 {true, true, 67}, {true, true, 129}}) {
    const int64_t d = 64;
    const std::string what = std::string(bf16 ? "bf16 " : "") + "left-padded " + std::to_string(t) +
                             ", some queries see no key" + (covers ? ", mask covers causal" : "");
    const Fill f = bf16 ? normalBf16() : normal();
    const std::string compute = bf16 ? "bf16" : "f32";
    all.push_back(Case("attention", what).in({2, 3, t, d}, f).in({2, 3, d, t}, f).in({2, 3, t, d}, f)
                      .in({2, 1, t, t}, leftPadded(), plan::I64).out({2, 3, t, d}).out({2, 3, t})
                      .attr("scale", 0.125).attr("key_transposed", int64_t(1)).attr("compute_dtype", compute)
                      .attr("mask_covers_causal", int64_t(covers)).tol(bf16 ? 1e-2 : 2e-5));
    all.push_back(Case("attention_grad", what).in({2, 3, t, d}, f).in({2, 3, t, d}, f).in({2, 3, t, d}, f)
                      .in({2, 1, t, t}, leftPadded(), plan::I64).in({2, 3, t, d}, f).in({2, 3, t}, constant(3.0))
                      .in({2, 3, t, d}, f).out({2, 3, t, d}).out({2, 3, t, d}).out({2, 3, t, d})
                      .attr("scale", 0.125).attr("compute_dtype", compute)
                      .attr("mask_covers_causal", int64_t(covers)).tol(bf16 ? 3e-2 : 5e-5));
  }
  // causal: the kernels mask by index and skip tiles without reading the
  // mask; the CPU reads the causal mask it is given. f32 and tensor-core
  // kernels, square and not (the mask is still key > query), each key
  // layout, and the packed form. 129 puts a tile's only query on the
  // diagonal of the last key tile.
  for (bool bf16 : {false, true})
    for (auto [tq, tk] : {std::pair<int64_t, int64_t>{67, 67}, {129, 129}, {45, 131}}) {
      const int64_t d = 64;
      const std::string what = std::string(bf16 ? "bf16 " : "") + "causal " + std::to_string(tq) + "x" +
                               std::to_string(tk);
      const Fill f = bf16 ? normalBf16() : normal();
      const std::string compute = bf16 ? "bf16" : "f32";
      const double tolerance = bf16 ? 1e-2 : 2e-5, gradTolerance = bf16 ? 3e-2 : 5e-5;
      all.push_back(Case("attention", what).in({2, 3, tq, d}, f).in({2, 3, d, tk}, f).in({2, 3, tk, d}, f)
                        .in({tq, tk}, causal(), plan::I64).out({2, 3, tq, d}).out({2, 3, tq})
                        .attr("scale", 0.125).attr("key_transposed", int64_t(1)).attr("compute_dtype", compute)
                        .attr("causal", int64_t(1)).tol(tolerance));
      all.push_back(Case("attention_grad", what).in({2, 3, tq, d}, f).in({2, 3, tk, d}, f).in({2, 3, tk, d}, f)
                        .in({tq, tk}, causal(), plan::I64).in({2, 3, tq, d}, f).in({2, 3, tq}, constant(3.0))
                        .in({2, 3, tq, d}, f).out({2, 3, tq, d}).out({2, 3, tk, d}).out({2, 3, tk, d})
                        .attr("scale", 0.125).attr("compute_dtype", compute).attr("causal", int64_t(1))
                        .tol(gradTolerance));
      if (tq != tk)
        continue;
      if (bf16 && tq == 67) // the tensor-core kernels' rows one element off alignment: loaded one at a time
        all.push_back(Case("attention", what).in({2, 3, tq, d}, f).in({2, 3, tk, d}, f).in({2, 3, tk, d}, f)
                          .in({tq, tk}, causal(), plan::I64).out({2, 3, tq, d}).out({2, 3, tq}).attr("scale", 0.125)
                          .attr("compute_dtype", compute).attr("causal", int64_t(1)).tol(tolerance).misaligned());
      const int64_t heads = 2, width = heads * d;
      all.push_back(Case("packed_attention", what).in({2, tq, 3 * width}, f).in({tq, tq}, causal(), plan::I64)
                        .out({2, tq, width}).out({2, heads, tq}).attr("heads", heads).attr("scale", 0.125)
                        .attr("compute_dtype", compute).attr("causal", int64_t(1)).tol(tolerance));
      all.push_back(Case("packed_attention_grad", what).in({2, tq, 3 * width}, f).in({tq, tq}, causal(), plan::I64)
                        .in({2, tq, width}, f).in({2, heads, tq}, constant(3.0)).in({2, tq, width}, f)
                        .out({2, tq, 3 * width}).attr("heads", heads).attr("scale", 0.125)
                        .attr("compute_dtype", compute).attr("causal", int64_t(1)).tol(gradTolerance));
    }
  // Grouped-query attention: 6 query heads read 2 key and value heads (3
  // each) or one (multi-query); the dK and dV kernels add the query heads
  // of a key head's group in turn. f32 and tensor-core kernels, causal by
  // index and by the mask read, key rows and (f32) a transposed key.
  for (bool bf16 : {false, true})
    for (int64_t keyHeads : {2, 1}) {
      const int64_t heads = 6, t = 67, d = 64;
      const bool byIndex = keyHeads == 2, keyTransposed = !bf16 && keyHeads == 1;
      const std::string what = std::string(bf16 ? "bf16 " : "") + std::to_string(heads) + " query heads, " +
                               std::to_string(keyHeads) + " key heads" + (byIndex ? ", causal" : ", mask read") +
                               (keyTransposed ? ", key transposed" : "");
      const Fill f = bf16 ? normalBf16() : normal();
      const std::string compute = bf16 ? "bf16" : "f32";
      // A key head's gradient sums its query heads' dS, each rounded to
      // bf16 before the product: up to 2.2e-2 on the emulator.
      const double tolerance = bf16 ? 1e-2 : 2e-5, gradTolerance = bf16 ? 4e-2 : 5e-5;
      const V q{2, heads, t, d}, kv{2, keyHeads, t, d}, key = keyTransposed ? V{2, keyHeads, d, t} : kv;
      all.push_back(Case("attention", what).in(q, f).in(key, f).in(kv, f).in({t, t}, causal(), plan::I64).out(q)
                        .out({2, heads, t}).attr("scale", 0.125).attr("key_transposed", int64_t(keyTransposed))
                        .attr("compute_dtype", compute).attr("causal", int64_t(byIndex)).tol(tolerance));
      all.push_back(Case("attention_grad", what).in(q, f).in(key, f).in(kv, f).in({t, t}, causal(), plan::I64)
                        .in(q, f).in({2, heads, t}, constant(3.0)).in(q, f).out(q).out(key).out(kv)
                        .attr("scale", 0.125).attr("key_transposed", int64_t(keyTransposed))
                        .attr("compute_dtype", compute).attr("causal", int64_t(byIndex)).tol(gradTolerance));
    }
  // token_major operands ([B, T, H, D]: projections viewed as heads, no
  // transpose): every operand so (BERT's, ViT's), and value and out only
  // with grouped keys (LLaMA's, whose rotary query and key are
  // head-major). f32 and tensor-core kernels; the rows are H D apart.
  for (bool bf16 : {false, true})
    for (bool all4 : {true, false}) {
      const int64_t heads = 4, keyHeads = all4 ? 4 : 2, t = 67, d = 64;
      const std::string what = std::string(bf16 ? "bf16 " : "") +
                               (all4 ? "token-major operands" : "token-major value and out, 2 key heads");
      const Fill f = bf16 ? normalBf16() : normal();
      const std::string compute = bf16 ? "bf16" : "f32";
      const double tolerance = bf16 ? 1e-2 : 2e-5, gradTolerance = bf16 ? 4e-2 : 5e-5; // as for grouped heads
      const V q = all4 ? V{2, t, heads, d} : V{2, heads, t, d}, k = all4 ? V{2, t, keyHeads, d} : V{2, keyHeads, t, d},
              v{2, t, keyHeads, d}, o{2, t, heads, d}, flags = all4 ? V{1, 1, 1, 1} : V{0, 0, 1, 1};
      all.push_back(Case("attention", what).in(q, f).in(k, f).in(v, f).in({t, t}, causal(), plan::I64).out(o)
                        .out({2, heads, t}).attr("scale", 0.125).attr("token_major", flags)
                        .attr("compute_dtype", compute).attr("causal", int64_t(all4)).tol(tolerance));
      all.push_back(Case("attention_grad", what).in(q, f).in(k, f).in(v, f).in({t, t}, causal(), plan::I64)
                        .in(o, f).in({2, heads, t}, constant(3.0)).in(o, f).out(q).out(k).out(v)
                        .attr("scale", 0.125).attr("token_major", flags).attr("compute_dtype", compute)
                        .attr("causal", int64_t(all4)).tol(gradTolerance));
    }
  // Norms.
  all.push_back(Case("layer_norm").in({45, 771}).in({771}).in({771}).out({45, 771}).out({45}).out({45})
                    .attr("axis", int64_t(1)).attr("epsilon", 1e-5).tol(1e-5));
  all.push_back(Case("layer_norm_grad").in({3, 45, 771}).in({771}).in({3, 45}).in({3, 45}, positive())
                    .in({3, 45, 771}).out({3, 45, 771}).out({771}).out({771}).attr("axis", int64_t(2)).tol(1e-5));
  all.push_back(Case("rms_norm").in({45, 771}).in({771}).out({45, 771}).out({45}).attr("axis", int64_t(1))
                    .attr("epsilon", 1e-6).tol(1e-5));
  all.push_back(Case("rms_norm_grad").in({45, 771}).in({771}).in({45}, positive()).in({45, 771}).out({45, 771})
                    .out({771}).attr("axis", int64_t(1)).tol(1e-5));
  // Mixed precision: bf16 activations (x, y, dy, dx) read widened and
  // rounded once where written; scale, bias and statistics f32. A bf16 ulp
  // either way on outputs up to about 4 is within 1e-2 (1 + |cpu|); a
  // missing or misplaced store is O(1).
  all.push_back(Case("layer_norm", "bf16").in({45, 771}, normal(), plan::BF16).in({771}).in({771})
                    .out({45, 771}, plan::BF16).out({45}).out({45}).attr("axis", int64_t(1)).attr("epsilon", 1e-5)
                    .tol(1e-2));
  all.push_back(Case("layer_norm_grad", "bf16").in({3, 45, 771}, normal(), plan::BF16).in({771}).in({3, 45})
                    .in({3, 45}, positive()).in({3, 45, 771}, normal(), plan::BF16).out({3, 45, 771}, plan::BF16)
                    .out({771}).out({771}).attr("axis", int64_t(2)).tol(1e-2));
  all.push_back(Case("rms_norm", "bf16").in({45, 771}, normal(), plan::BF16).in({771}).out({45, 771}, plan::BF16)
                    .out({45}).attr("axis", int64_t(1)).attr("epsilon", 1e-6).tol(1e-2));
  all.push_back(Case("rms_norm_grad", "bf16").in({45, 771}, normal(), plan::BF16).in({771}).in({45}, positive())
                    .in({45, 771}, normal(), plan::BF16).out({45, 771}, plan::BF16).out({771}).attr("axis", int64_t(1))
                    .tol(1e-2));
  // Scale and bias stored as bf16 too, as mixed-precision plans give the
  // norms their parameters, and their gradients written as bf16.
  all.push_back(Case("layer_norm", "bf16 parameters").in({45, 771}, normal(), plan::BF16).in({771}, normal(), plan::BF16)
                    .in({771}, normal(), plan::BF16).out({45, 771}, plan::BF16).out({45}).out({45})
                    .attr("axis", int64_t(1)).attr("epsilon", 1e-5).tol(1e-2));
  all.push_back(Case("layer_norm_grad", "bf16 parameters").in({3, 45, 771}, normal(), plan::BF16)
                    .in({771}, normal(), plan::BF16).in({3, 45}).in({3, 45}, positive())
                    .in({3, 45, 771}, normal(), plan::BF16).out({3, 45, 771}, plan::BF16).out({771}, plan::BF16)
                    .out({771}, plan::BF16).attr("axis", int64_t(2)).tol(1e-2));
  all.push_back(Case("rms_norm", "bf16 parameters").in({45, 771}, normal(), plan::BF16).in({771}, normal(), plan::BF16)
                    .out({45, 771}, plan::BF16).out({45}).attr("axis", int64_t(1)).attr("epsilon", 1e-6).tol(1e-2));
  all.push_back(Case("rms_norm_grad", "bf16 parameters").in({45, 771}, normal(), plan::BF16)
                    .in({771}, normal(), plan::BF16).in({45}, positive()).in({45, 771}, normal(), plan::BF16)
                    .out({45, 771}, plan::BF16).out({771}, plan::BF16).attr("axis", int64_t(1)).tol(1e-2));
  // Rows whose size is a multiple of 8, up to 2048, aligned: one warp per
  // row from registers (768, GPT-2's hidden size; 264, whose 33 vectors
  // leave most lanes one short; 2048, the largest). Misaligned, 771 and
  // over 2048: one block per row, as above.
  for (int64_t cols : {768, 264, 2048}) {
    const std::string what = std::to_string(cols) + " bf16";
    all.push_back(Case("layer_norm", what).in({37, cols}, normal(), plan::BF16).in({cols}, normal(), plan::BF16)
                      .in({cols}, normal(), plan::BF16).out({37, cols}, plan::BF16).out({37}).out({37})
                      .attr("axis", int64_t(1)).attr("epsilon", 1e-5).tol(1e-2));
    all.push_back(Case("layer_norm_grad", what).in({37, cols}, normal(), plan::BF16)
                      .in({cols}, normal(), plan::BF16).in({37}).in({37}, positive())
                      .in({37, cols}, normal(), plan::BF16).out({37, cols}, plan::BF16).out({cols}, plan::BF16)
                      .out({cols}, plan::BF16).attr("axis", int64_t(1)).tol(1e-2));
    all.push_back(Case("rms_norm", std::to_string(cols)).in({37, cols}).in({cols}).out({37, cols}).out({37})
                      .attr("axis", int64_t(1)).attr("epsilon", 1e-6).tol(1e-5));
    all.push_back(Case("rms_norm_grad", std::to_string(cols)).in({37, cols}).in({cols}).in({37}, positive())
                      .in({37, cols}).out({37, cols}).out({cols}).attr("axis", int64_t(1)).tol(1e-5));
  }
  all.push_back(Case("layer_norm", "768").in({37, 768}).in({768}).in({768}).out({37, 768}).out({37}).out({37})
                    .attr("axis", int64_t(1)).attr("epsilon", 1e-5).tol(1e-5));
  all.push_back(Case("layer_norm_grad", "768").in({37, 768}).in({768}).in({37}).in({37}, positive()).in({37, 768})
                    .out({37, 768}).out({768}).out({768}).attr("axis", int64_t(1)).tol(1e-5));
  all.push_back(Case("layer_norm", "768").in({37, 768}).in({768}).in({768}).out({37, 768}).out({37}).out({37})
                    .attr("axis", int64_t(1)).attr("epsilon", 1e-5).tol(1e-5).misaligned());
  all.push_back(Case("layer_norm_grad", "768").in({37, 768}).in({768}).in({37}).in({37}, positive()).in({37, 768})
                    .out({37, 768}).out({768}).out({768}).attr("axis", int64_t(1)).tol(1e-5).misaligned());
  all.push_back(Case("rms_norm", "4096").in({5, 4096}).in({4096}).out({5, 4096}).out({5}).attr("axis", int64_t(1))
                    .attr("epsilon", 1e-6).tol(1e-5));
  // Many rows: the warp kernel's blocks each stream a chunk of rows and (up
  // to 1024 columns) sum their chunk of the scale and bias gradients, the
  // last chunk short; wider rows sum them in the separate partials kernel.
  all.push_back(Case("layer_norm_grad", "1031 rows 768 bf16").in({1031, 768}, normal(), plan::BF16)
                    .in({768}, normal(), plan::BF16).in({1031}).in({1031}, positive())
                    .in({1031, 768}, normal(), plan::BF16).out({1031, 768}, plan::BF16).out({768}, plan::BF16)
                    .out({768}, plan::BF16).attr("axis", int64_t(1)).tol(1e-2));
  // More chunks than the parameter sums' lanes (32): each lane adds several.
  // A warp adds its rows' terms of the scale and bias gradients in f32
  // (the CPU all 4099 rows in f64), and they cancel to about 0.07: 1.2e-5
  // apart on some inputs (a case's data changes as cases are added before
  // it), so the tolerance of sum_to's 4099 rows.
  all.push_back(Case("layer_norm_grad", "4099 rows 72")
                    .in({4099, 72})
                    .in({72})
                    .in({4099})
                    .in({4099}, positive())
                    .in({4099, 72})
                    .out({4099, 72})
                    .out({72})
                    .out({72})
                    .attr("axis", int64_t(1))
                    .tol(1e-4));
  all.push_back(Case("layer_norm_grad", "1031 rows 768").in({1031, 768}).in({768}).in({1031}).in({1031}, positive())
                    .in({1031, 768}).out({1031, 768}).out({768}).out({768}).attr("axis", int64_t(1)).tol(1e-5));
  all.push_back(Case("rms_norm_grad", "1031 rows 1024").in({1031, 1024}).in({1024}).in({1031}, positive())
                    .in({1031, 1024}).out({1031, 1024}).out({1024}).attr("axis", int64_t(1)).tol(1e-5));
  all.push_back(Case("layer_norm_grad", "1031 rows 2048").in({1031, 2048}).in({2048}).in({1031}).in({1031}, positive())
                    .in({1031, 2048}).out({1031, 2048}).out({2048}).out({2048}).attr("axis", int64_t(1)).tol(1e-5));
  // accumulate: the residual path's gradient added to dx as it is written,
  // in each kernel: the warp kernel with the parameter sums (768 bf16), the
  // one without (2048), one block per row (771, and 768 misaligned).
  all.push_back(Case("layer_norm_grad", "1031 rows 768 bf16 accumulate").in({1031, 768}, normal(), plan::BF16)
                    .in({768}, normal(), plan::BF16).in({1031}).in({1031}, positive())
                    .in({1031, 768}, normal(), plan::BF16).in({1031, 768}, normal(), plan::BF16)
                    .out({1031, 768}, plan::BF16).out({768}, plan::BF16).out({768}, plan::BF16)
                    .attr("axis", int64_t(1)).attr("accumulate", int64_t(1)).tol(1e-2));
  all.push_back(Case("rms_norm_grad", "2048 accumulate").in({37, 2048}).in({2048}).in({37}, positive())
                    .in({37, 2048}).in({37, 2048}).out({37, 2048}).out({2048}).attr("axis", int64_t(1))
                    .attr("accumulate", int64_t(1)).tol(1e-5));
  all.push_back(Case("layer_norm_grad", "771 accumulate").in({3, 45, 771}).in({771}).in({3, 45})
                    .in({3, 45}, positive()).in({3, 45, 771}).in({3, 45, 771}).out({3, 45, 771}).out({771}).out({771})
                    .attr("axis", int64_t(2)).attr("accumulate", int64_t(1)).tol(1e-5));
  all.push_back(Case("layer_norm_grad", "768 accumulate").in({37, 768}).in({768}).in({37}).in({37}, positive())
                    .in({37, 768}).in({37, 768}).out({37, 768}).out({768}).out({768}).attr("axis", int64_t(1))
                    .attr("accumulate", int64_t(1)).tol(1e-5).misaligned());
  // Query, key, value and out stored as bf16 (as in a mixed-precision
  // plan), their gradients too: the tensor-core kernels (d=64) and the f32
  // ones (d=80) read and write them through the dtype. The values are those
  // of the f32-held cases above, so the same tolerances.
  for (int64_t d : {64, 80}) {
    const int64_t tq = 45, tk = 131;
    const std::string what = "bf16 storage d=" + std::to_string(d);
    const plan::DType b = plan::BF16;
    all.push_back(Case("attention", what).in({2, 3, tq, d}, normal(), b).in({2, 3, tk, d}, normal(), b)
                      .in({2, 3, tk, d}, normal(), b).in({tq, tk}, causal(), plan::I64).out({2, 3, tq, d}, b)
                      .out({2, 3, tq}).attr("scale", 1.0 / std::sqrt(double(d)))
                      .attr("compute_dtype", std::string("bf16")).tol(1e-2));
    all.push_back(Case("attention_grad", what).in({2, 3, tq, d}, normal(), b).in({2, 3, tk, d}, normal(), b)
                      .in({2, 3, tk, d}, normal(), b).in({tq, tk}, causal(), plan::I64).in({2, 3, tq, d}, normal(), b)
                      .in({2, 3, tq}, constant(3.0)).in({2, 3, tq, d}, normal(), b).out({2, 3, tq, d}, b)
                      .out({2, 3, tk, d}, b).out({2, 3, tk, d}, b).attr("scale", 1.0 / std::sqrt(double(d)))
                      .attr("compute_dtype", std::string("bf16")).tol(3e-2));
  }
  // Packed attention: the heads read in place from [B, T, 3 heads D] with a
  // row stride of 3 heads D (and out written with heads D): the f32 kernels
  // (d=40, 3 heads), the tensor-core ones on bf16 values (d=64, 2 heads),
  // and both on bf16 storage. Odd T, a causal mask broadcast over heads.
  struct Packed {
    int64_t heads, d;
    bool bf16Compute, bf16Storage;
  };
  for (Packed p : {Packed{3, 40, false, false}, Packed{2, 64, true, false}, Packed{2, 64, true, true},
                   Packed{3, 40, true, true}}) {
    const int64_t t = 67, width = p.heads * p.d;
    const std::string what = "heads=" + std::to_string(p.heads) + " d=" + std::to_string(p.d) +
                             (p.bf16Compute ? " bf16" : "") + (p.bf16Storage ? " storage" : "");
    const plan::DType storage = p.bf16Storage ? plan::BF16 : plan::F32;
    const Fill values = p.bf16Compute && !p.bf16Storage ? normalBf16() : normal();
    const std::string compute = p.bf16Compute ? "bf16" : "f32";
    const double scale = 1.0 / std::sqrt(double(p.d));
    all.push_back(Case("packed_attention", what).in({2, t, 3 * width}, values, storage).in({t, t}, causal(), plan::I64)
                      .out({2, t, width}, storage).out({2, p.heads, t}).attr("heads", p.heads).attr("scale", scale)
                      .attr("compute_dtype", compute).tol(p.bf16Compute ? 1e-2 : 2e-5));
    all.push_back(Case("packed_attention_grad", what).in({2, t, 3 * width}, values, storage)
                      .in({t, t}, causal(), plan::I64).in({2, t, width}, values, storage)
                      .in({2, p.heads, t}, constant(3.0)).in({2, t, width}, values, storage)
                      .out({2, t, 3 * width}, storage).attr("heads", p.heads).attr("scale", scale)
                      .attr("compute_dtype", compute).tol(p.bf16Compute ? 3e-2 : 5e-5));
  }
  // Losses.
  all.push_back(Case("softmax_cross_entropy").in({37, 5003}).in({37}, integers(0, 5003), plan::I64).out({})
                    .tol(1e-6));
  all.push_back(Case("softmax_cross_entropy", "ignore_index, sum").in({37, 503}).in({37}, integers(-1, 503), plan::I64)
                    .out({}).attr("ignore_index", int64_t(-1)).attr("reduction", std::string("sum")).tol(1e-6));
  all.push_back(Case("softmax_cross_entropy", "label out of range").in({7, 11}).in({7}, integers(11, 12), plan::I64)
                    .out({}).dataError());
  all.push_back(Case("softmax_cross_entropy_grad").in({37, 5003}).in({37}, integers(-1, 5003), plan::I64)
                    .in({}, constant(1.0)).out({37, 5003}).attr("ignore_index", int64_t(-1)).tol(1e-6));
  // Mixed precision: bf16 logits read as f32, the gradient rounded to bf16
  // once on its store (the CPU's f32 result rounded the same way, exactly).
  all.push_back(Case("softmax_cross_entropy", "bf16 logits").in({37, 5003}, normal(), plan::BF16)
                    .in({37}, integers(0, 5003), plan::I64).out({}).tol(1e-6));
  // Few classes and a summed loss, so the gradient is O(0.1): a bf16 ulp
  // either way (the two sides' f32 results can round apart) is 4e-4, a
  // missing or wrong store is O(0.1).
  all.push_back(Case("softmax_cross_entropy_grad", "bf16").in({37, 13}, normal(), plan::BF16)
                    .in({37}, integers(-1, 13), plan::I64).in({}, constant(1.0)).out({37, 13}, plan::BF16)
                    .attr("ignore_index", int64_t(-1)).attr("reduction", std::string("sum")).tol(2e-3));
  // In place over the logits (plan-in-place gives the gradient the
  // logits' bytes), f32 and bf16.
  all.push_back(Case("softmax_cross_entropy_grad", "in place").in({37, 5003}).in({37}, integers(-1, 5003), plan::I64)
                    .in({}, constant(1.0)).inPlace(0).attr("ignore_index", int64_t(-1)).tol(1e-6));
  all.push_back(Case("softmax_cross_entropy_grad", "bf16 in place").in({37, 13}, normal(), plan::BF16)
                    .in({37}, integers(-1, 13), plan::I64).in({}, constant(1.0)).inPlace(0)
                    .attr("ignore_index", int64_t(-1)).attr("reduction", std::string("sum")).tol(2e-3));
  // The loss and its gradient in one kernel: rows staged in shared memory
  // (f32 5003 classes; bf16 50257, GPT-2's, above the 48 KiB default) and
  // rows too long to stage (f32 52001 classes, 203 KiB), in place as
  // plan-in-place gives it, and apart.
  all.push_back(Case("softmax_cross_entropy_with_grad").in({37, 5003}).in({37}, integers(-1, 5003), plan::I64)
                    .in({}, constant(1.0)).out({}).out({37, 5003}).attr("ignore_index", int64_t(-1)).tol(1e-6));
  all.push_back(Case("softmax_cross_entropy_with_grad", "in place").in({37, 5003})
                    .in({37}, integers(-1, 5003), plan::I64).in({}, constant(0.5)).out({}).inPlace(0)
                    .attr("ignore_index", int64_t(-1)).tol(1e-6));
  all.push_back(Case("softmax_cross_entropy_with_grad", "bf16, 50257 classes, in place")
                    .in({7, 50257}, normal(), plan::BF16).in({7}, integers(0, 50257), plan::I64)
                    .in({}, constant(1.0)).out({}).inPlace(0).attr("reduction", std::string("sum")).tol(2e-3));
  // bf16 rows in 16-byte accesses: rows starting at every offset within 16
  // bytes (1001 = 1 mod 8), ignored rows, rows shorter than a vector, and
  // buffers off the 16-byte boundary (the one-element kernel).
  all.push_back(Case("softmax_cross_entropy_with_grad", "bf16, 1001 classes, apart")
                    .in({13, 1001}, normal(), plan::BF16).in({13}, integers(-1, 1001), plan::I64)
                    .in({}, constant(1.0)).out({}).out({13, 1001}, plan::BF16).attr("ignore_index", int64_t(-1))
                    .tol(2e-3));
  all.push_back(Case("softmax_cross_entropy_with_grad", "bf16, 5 classes").in({9, 5}, normal(), plan::BF16)
                    .in({9}, integers(0, 5), plan::I64).in({}, constant(1.0)).out({}).out({9, 5}, plan::BF16)
                    .tol(2e-3));
  all.push_back(Case("softmax_cross_entropy_with_grad", "bf16, 1001 classes, apart")
                    .in({13, 1001}, normal(), plan::BF16).in({13}, integers(0, 1001), plan::I64)
                    .in({}, constant(1.0)).out({}).out({13, 1001}, plan::BF16).tol(2e-3).misaligned());
  // bf16 rows up to 110 KiB go double-buffered (two staged rows, the next
  // one's copy in flight; 7 rows on fewer blocks, so each block alternates
  // its two stages), longer ones one staged row at a time.
  all.push_back(Case("softmax_cross_entropy_with_grad", "bf16, 60001 classes (one staged row), in place")
                    .in({5, 60001}, normal(), plan::BF16).in({5}, integers(-1, 60001), plan::I64)
                    .in({}, constant(1.0)).out({}).inPlace(0).attr("ignore_index", int64_t(-1))
                    .attr("reduction", std::string("sum")).tol(2e-3));
  all.push_back(Case("softmax_cross_entropy_with_grad", "row too long to stage").in({5, 52001})
                    .in({5}, integers(-1, 52001), plan::I64).in({}, constant(1.0)).out({}).inPlace(0)
                    .attr("ignore_index", int64_t(-1)).tol(1e-6));
  all.push_back(Case("softmax_cross_entropy_with_grad", "row too long to stage, apart").in({5, 52001})
                    .in({5}, integers(0, 52001), plan::I64).in({}, constant(1.0)).out({}).out({5, 52001}).tol(1e-6));
  all.push_back(Case("softmax_cross_entropy_with_grad", "label out of range").in({7, 11})
                    .in({7}, integers(11, 12), plan::I64).in({}, constant(1.0)).out({}).out({7, 11}).dataError());
  // Padded classes (graph-pad-classes): rows of 5008 or 50264 logits, the
  // first 5003 or 50257 classes, the rest padding whose gradient is zero;
  // a label within the row but past the classes is a data error.
  all.push_back(Case("softmax_cross_entropy", "classes 5003 of 5008").in({37, 5008})
                    .in({37}, integers(-1, 5003), plan::I64).out({}).attr("ignore_index", int64_t(-1))
                    .attr("classes", int64_t(5003)).tol(1e-6));
  all.push_back(Case("softmax_cross_entropy_grad", "classes 5003 of 5008").in({37, 5008})
                    .in({37}, integers(-1, 5003), plan::I64).in({}, constant(1.0)).out({37, 5008})
                    .attr("ignore_index", int64_t(-1)).attr("classes", int64_t(5003)).tol(1e-6));
  all.push_back(Case("softmax_cross_entropy_with_grad", "classes 5003 of 5008, in place").in({37, 5008})
                    .in({37}, integers(-1, 5003), plan::I64).in({}, constant(1.0)).out({}).inPlace(0)
                    .attr("ignore_index", int64_t(-1)).attr("classes", int64_t(5003)).tol(1e-6));
  all.push_back(Case("softmax_cross_entropy_with_grad", "bf16, 50257 of 50264 classes, in place")
                    .in({7, 50264}, normal(), plan::BF16).in({7}, integers(0, 50257), plan::I64)
                    .in({}, constant(1.0)).out({}).inPlace(0).attr("reduction", std::string("sum"))
                    .attr("classes", int64_t(50257)).tol(2e-3));
  all.push_back(Case("softmax_cross_entropy_with_grad", "bf16, 1001 of 1008 classes, apart")
                    .in({13, 1008}, normal(), plan::BF16).in({13}, integers(-1, 1001), plan::I64)
                    .in({}, constant(1.0)).out({}).out({13, 1008}, plan::BF16).attr("ignore_index", int64_t(-1))
                    .attr("classes", int64_t(1001)).tol(2e-3));
  all.push_back(Case("softmax_cross_entropy_with_grad", "label past the classes").in({7, 16})
                    .in({7}, integers(11, 12), plan::I64).in({}, constant(1.0)).out({}).out({7, 16})
                    .attr("classes", int64_t(11)).dataError());
  all.push_back(Case("mse_loss").in({3, 1001}).in({3, 1001}).out({}).tol(1e-6));
  all.push_back(Case("mse_loss_grad").in({3, 1001}).in({3, 1001}).in({}, constant(0.5)).out({3, 1001}).tol(1e-6));
  // Optimizers, in place over a flat shard; step 3 (not the first).
  all.push_back(Case("adamw_update").in({100003}).in({100003}).in({100003}).in({100003}, positive())
                    .in({}, constant(3), plan::I64).inPlace(0).inPlace(2).inPlace(3).attr("lr", 1e-3)
                    .attr("beta1", 0.9).attr("beta2", 0.999).attr("eps", 1e-8).attr("weight_decay", 0.01).tol(1e-6));
  // 4 elements per access, the last 3 one by one; off the 16-byte boundary,
  // all one by one.
  all.push_back(Case("adamw_update").in({1003}).in({1003}).in({1003}).in({1003}, positive())
                    .in({}, constant(3), plan::I64).inPlace(0).inPlace(2).inPlace(3).attr("lr", 1e-3)
                    .attr("beta1", 0.9).attr("beta2", 0.999).attr("eps", 1e-8).attr("weight_decay", 0.01).tol(1e-6)
                    .misaligned());
  all.push_back(Case("adamw_update", "cosine schedule").in({1003}).in({1003}).in({1003}).in({1003}, positive())
                    .in({}, constant(5), plan::I64).inPlace(0).inPlace(2).inPlace(3).attr("lr", 1e-3)
                    .attr("lr_schedule", std::string("cosine")).attr("warmup_steps", int64_t(2))
                    .attr("total_steps", int64_t(10)).attr("min_lr", 1e-5).attr("beta1", 0.9).attr("beta2", 0.999)
                    .attr("eps", 1e-8).attr("weight_decay", 0.01).tol(1e-6));
  // A bf16 gradient, as a mixed-precision plan on one rank hands it over
  // (no cast to f32): 4 elements per 8-byte access and the tail, and
  // misaligned one by one; SGD with momentum too.
  all.push_back(Case("adamw_update", "bf16 gradient").in({100003}).in({100003}, normal(), plan::BF16).in({100003})
                    .in({100003}, positive()).in({}, constant(3), plan::I64).inPlace(0).inPlace(2).inPlace(3)
                    .attr("lr", 1e-3).attr("beta1", 0.9).attr("beta2", 0.999).attr("eps", 1e-8)
                    .attr("weight_decay", 0.01).tol(1e-6));
  all.push_back(Case("adamw_update", "bf16 gradient").in({1003}).in({1003}, normal(), plan::BF16).in({1003})
                    .in({1003}, positive()).in({}, constant(3), plan::I64).inPlace(0).inPlace(2).inPlace(3)
                    .attr("lr", 1e-3).attr("beta1", 0.9).attr("beta2", 0.999).attr("eps", 1e-8)
                    .attr("weight_decay", 0.01).tol(1e-6).misaligned());
  all.push_back(Case("sgd_update", "momentum, f16 gradient").in({1003}).in({1003}, normal(), plan::F16).in({1003})
                    .in({}, constant(3), plan::I64).inPlace(0).inPlace(2).attr("lr", 0.05).attr("momentum", 0.9)
                    .attr("dampening", 0.0).attr("weight_decay", 1e-4).attr("nesterov", int64_t(0)).tol(1e-6));
  all.push_back(Case("sgd_update", "momentum, nesterov").in({100003}).in({100003}).in({100003})
                    .in({}, constant(3), plan::I64).inPlace(0).inPlace(2).attr("lr", 0.05).attr("momentum", 0.9)
                    .attr("dampening", 0.0).attr("weight_decay", 1e-4).attr("nesterov", int64_t(1)).tol(1e-6));
  all.push_back(Case("sgd_update", "plain").in({1003}).in({1003}).in({}, constant(1), plan::I64).inPlace(0)
                    .attr("lr", 0.05).attr("momentum", 0.0).attr("dampening", 0.0).attr("weight_decay", 0.0)
                    .attr("nesterov", int64_t(0)).tol(1e-6));
  // Gradient clipping: several shards of odd sizes; a norm above max_norm
  // (scale < 1) and one below (scale 1).
  all.push_back(Case("sum_squares").in({100003}).in({1003}).in({7}).out({1}).tol(1e-6));
  all.push_back(Case("clip_coefficient", "clipped").in({1}, constant(37.5)).out({1}).out({1}).attr("max_norm", 1.0)
                    .tol(1e-6));
  all.push_back(Case("clip_coefficient", "under max_norm").in({1}, constant(0.25)).out({1}).out({1})
                    .attr("max_norm", 1.0).tol(1e-6));
  // A block's later rows: the row kernels launch 16 blocks a
  // multiprocessor at most, each taking rows blockIdx.x + k gridDim.x, so
  // on a device of one multiprocessor these cases' blocks take two or
  // three rows each (the double-buffered cross entropy, one block, all
  // of them), reusing their shared memory row after row; one more with rows
  // too long for two stages (60001 bf16 classes), staged one at a time.
  for (const char *label :
       {"softmax", "log_softmax", "softmax_grad", "masked_softmax", "layer_norm", "layer_norm_grad", "rms_norm",
        "rms_norm_grad", "softmax_cross_entropy", "softmax_cross_entropy_grad", "softmax_cross_entropy_with_grad",
        "softmax_cross_entropy_with_grad bf16, 1001 classes, apart"}) {
    auto found = std::find_if(all.begin(), all.end(), [&](const Case &c) { return c.label == label; });
    if (found == all.end()) {
      std::printf("FAIL no case is labelled '%s'\n", label);
      ++failures;
      continue;
    }
    all.push_back(Case(*found).onOneMultiprocessor());
  }
  all.push_back(Case("softmax_cross_entropy_with_grad", "bf16, 60001 classes (one staged row), apart")
                    .in({20, 60001}, normal(), plan::BF16).in({20}, integers(-1, 60001), plan::I64)
                    .in({}, constant(1.0)).out({}).out({20, 60001}, plan::BF16).attr("ignore_index", int64_t(-1))
                    .tol(2e-3).onOneMultiprocessor());
  // The interleaved rotation (Cohere, GLM, ERNIE 4.5: pairs (2j, 2j + 1)),
  // at the end so that the cases before keep their data: a pair a thread
  // (D of 6, and misaligned), and 4 pairs a thread on bf16 (D of 16, 64),
  // to the same bits as the CPU kernel.
  for (const char *op : {"rotary", "rotary_grad"}) {
    all.push_back(Case(op, "interleaved, token-major, D 6")
                      .in({3, 7, 5, 6})
                      .in({3, 7, 1, 6})
                      .in({3, 7, 1, 6})
                      .out({3, 7, 5, 6})
                      .attr("interleaved", int64_t(1))
                      .tol(0));
    for (int64_t width : {16, 64})
      for (bool misaligned : {false, true}) {
        Case c = Case(op, "interleaved, bf16, D " + std::to_string(width))
                     .in({2, 9, 3, width}, normal(), plan::BF16)
                     .in({1, 9, 1, width}, normal(), plan::BF16)
                     .in({1, 9, 1, width}, normal(), plan::BF16)
                     .out({2, 9, 3, width}, plan::BF16)
                     .attr("interleaved", int64_t(1))
                     .tol(0);
        all.push_back(misaligned ? c.misaligned() : c);
      }
  }
  // Attention sinks (GPT-OSS): a logit per query head, N(0, 1) as the
  // scores are, in each row's denominator. Only the forward kernels change
  // (the gradient kernels recompute P from a logsumexp with the sink in):
  // f32 and tensor-core kernels at each head size, causal by index and by
  // the mask, and left-padded rows that see no key (output 0, logsumexp
  // the sink). At the end, so that the cases before keep their data.
  for (auto [bf16, d, tq, tk, causalByIndex] :
       {std::tuple<bool, int64_t, int64_t, int64_t, bool>{false, 64, 67, 67, true},
        {false, 80, 45, 131, false},
        {true, 64, 67, 67, true},
        {true, 128, 45, 131, false},
        {true, 32, 129, 129, true}}) {
    const std::string what = std::string(bf16 ? "bf16 " : "") + "sinks d=" + std::to_string(d) + " " +
                             std::to_string(tq) + "x" + std::to_string(tk);
    const Fill f = bf16 ? normalBf16() : normal();
    all.push_back(Case("attention", what)
                      .in({2, 3, tq, d}, f)
                      .in({2, 3, tk, d}, f)
                      .in({2, 3, tk, d}, f)
                      .in({tq, tk}, causal(), plan::I64)
                      .in({3}, normal())
                      .out({2, 3, tq, d})
                      .out({2, 3, tq})
                      .attr("scale", 1.0 / std::sqrt(double(d)))
                      .attr("causal", int64_t(causalByIndex))
                      .attr("compute_dtype", std::string(bf16 ? "bf16" : "f32"))
                      .tol(bf16 ? 1e-2 : 2e-5));
  }
  for (bool bf16 : {false, true}) {
    const int64_t d = 64, t = 67;
    const Fill f = bf16 ? normalBf16() : normal();
    all.push_back(Case("attention", std::string(bf16 ? "bf16 " : "") + "sinks, left-padded, some queries see no key")
                      .in({2, 3, t, d}, f)
                      .in({2, 3, t, d}, f)
                      .in({2, 3, t, d}, f)
                      .in({2, 1, t, t}, leftPadded(), plan::I64)
                      .in({3}, normal())
                      .out({2, 3, t, d})
                      .out({2, 3, t})
                      .attr("scale", 0.125)
                      .attr("compute_dtype", std::string(bf16 ? "bf16" : "f32"))
                      .attr("mask_covers_causal", int64_t(1))
                      .tol(bf16 ? 1e-2 : 2e-5));
  }
  // A mixture of experts' projection and its weights' gradient, f32 and
  // bf16, weights [E, K, F] and [E, F, K].
  auto expertCases = [&](const std::string &what, int64_t n, int64_t m, int64_t k, int64_t f, int64_t experts,
                         Fill expertOfRow) {
    for (bool transposed : {false, true})
      for (bool bf16 : {false, true}) {
        const std::string name =
            std::string(bf16 ? "bf16 " : "") + what + (transposed ? ", weights [E, F, K]" : ", weights [E, K, F]");
        const plan::DType dtype = bf16 ? plan::BF16 : plan::F32;
        const V weights = transposed ? V{experts, f, k} : V{experts, k, f};
        all.push_back(Case("expert_matmul", name)
                          .in({n, m, k}, normal(), dtype)
                          .in(weights, normal(), dtype)
                          .in({n}, expertOfRow, plan::I64)
                          .out({n, m, f}, dtype)
                          .attr("transpose_weights", int64_t(transposed))
                          .tol(bf16 ? 1e-2 : 1e-5));
        all.push_back(Case("expert_matmul_weight_grad", name)
                          .in({n, m, k}, normal(), dtype)
                          .in({n, m, f}, normal(), dtype)
                          .in({n}, expertOfRow, plan::I64)
                          .out(weights, dtype)
                          .attr("transpose_weights", int64_t(transposed))
                          .tol(bf16 ? 1e-2 : 1e-5));
      }
  };
  // 37 rows (2 a sample) over 5 experts, negative experts among them.
  expertCases("37 rows of 2", 37, 2, 33, 19, 5, integers(-5, 5));
  // The grouped kernels' tiles: 64 tokens by 64 columns, 16 k (f32) or 32
  // (bf16, tensor cores) a stage, 16 or 32 tokens for the gradient. About
  // 100 tokens each for experts 0-2 (two token tiles, the second partial),
  // none for expert 3, one sub-row a row (transformers' batched_mm); k and
  // f past a tile's multiple, and also multiples of 8 (bf16 rows of 16
  // bytes, staged a 16-byte load at a time).
  expertCases("tiles, an expert without rows, k 70, f 133", 301, 1, 70, 133, 4, integers(0, 3));
  expertCases("tiles, an expert without rows, k 72, f 136", 301, 1, 72, 136, 4, integers(0, 3));
  all.push_back(Case("expert_matmul", "expert out of range")
                    .in({5, 2, 3})
                    .in({4, 3, 7})
                    .in({5}, integers(4, 5), plan::I64)
                    .out({5, 2, 7})
                    .dataError());
  return all;
}

/// The CUDA table implements exactly the contract, as the CPU table does.
void checkTables(const std::vector<Case> &all) {
  std::set<std::string> contract, tested;
  for (const contract::KernelSignature &s : contract::kernelSignatures())
    contract.insert(std::string(s.name));
  const std::vector<std::string> names = cudaKernelNames();
  const std::set<std::string> cudaNames(names.begin(), names.end());
  for (const Case &c : all)
    tested.insert(c.kernel);
  for (const std::string &name : contract) {
    if (!cudaNames.count(name)) {
      std::printf("FAIL the CUDA backend has no kernel '%s'\n", name.c_str());
      ++failures;
    }
    if (!tested.count(name)) {
      std::printf("FAIL no case tests kernel '%s'\n", name.c_str());
      ++failures;
    }
  }
  for (const std::string &name : cudaNames)
    if (!contract.count(name)) {
      std::printf("FAIL the CUDA kernel '%s' is not in the contract\n", name.c_str());
      ++failures;
    }
}

} // namespace

int main(int argc, char **argv) {
  // [--once] [--shard I/N] [KERNEL]: only the cases of kernels whose name
  // contains KERNEL; with --shard, only every Nth case from the Ith (from
  // 0), so that N processes share the run (the emulator uses one core).
  bool once = false;
  std::string only;
  int shard = 0, shards = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--once")
      once = true;
    else if (arg == "--shard" && i + 1 < argc && std::sscanf(argv[i + 1], "%d/%d", &shard, &shards) == 2 &&
             shards > 0 && shard >= 0 && shard < shards)
      ++i;
    else if (arg.rfind("--", 0) == 0 || !only.empty()) {
      std::fprintf(stderr, "usage: %s [--once] [--shard I/N] [KERNEL]\n", argv[0]);
      return 2;
    } else
      only = arg;
  }
  const std::vector<Case> all = cases();
  checkTables(all);
  if (cudaDeviceCount() == 0) {
    std::printf("%s: kernel tables checked; SKIP the kernel comparisons: no CUDA device is visible\n",
                failures ? "FAIL" : "PASS");
    return failures ? 1 : 77;
  }
  GpuContext gpu;
  cudaDeviceProp props;
  CHECK_CUDA(cudaGetDeviceProperties(&props, 0));
  std::printf("device: %s, %d multiprocessors\n", props.name, props.multiProcessorCount);
  gpu.multiprocessors = props.multiProcessorCount;
  CHECK_CUDA(cudaStreamCreate(&gpu.stream));
  if (cublasLtCreate(&gpu.lt) != CUBLAS_STATUS_SUCCESS) {
    std::printf("FAIL cublasLtCreate\n");
    return 1;
  }
  CHECK_CUDA(cudaMalloc(&gpu.workspace, 32ull << 20));
  CHECK_CUDA(cudaMalloc(&gpu.error, sizeof(cuda::DeviceError)));
  const StepContext stepContext{3, 1};
  CHECK_CUDA(cudaMalloc(&gpu.context, sizeof(StepContext)));
  CHECK_CUDA(cudaMemcpy(gpu.context, &stepContext, sizeof(StepContext), cudaMemcpyHostToDevice));
  int cases = 0;
  std::vector<std::pair<double, std::string>> seconds; // per case, to find what makes the run slow
  for (size_t i = 0; i < all.size(); ++i) {
    const Case &c = all[i];
    if (static_cast<int>(i % shards) != shard || (!only.empty() && c.kernel.find(only) == std::string::npos))
      continue;
    const auto start = std::chrono::steady_clock::now();
    runCase(c, gpu, /*seed=*/static_cast<unsigned>(i + 1), once); // the same data in any shard or filter
    seconds.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                         c.kernel + " " + c.label);
    ++cases;
  }
  std::sort(seconds.rbegin(), seconds.rend());
  for (size_t i = 0; i < std::min<size_t>(seconds.size(), 10); ++i)
    std::printf("slowest case: %7.2f s  %s\n", seconds[i].first, seconds[i].second.c_str());
  std::printf("%s: %d of %d runs of %d CUDA kernel cases (a run per kernel variant) agree with the CPU kernels\n",
              failures ? "FAIL" : "PASS", ran - failures, ran, cases);
  cudaFree(gpu.error);
  cudaFree(gpu.context);
  cudaFree(gpu.workspace);
  cublasLtDestroy(gpu.lt);
  cudaStreamDestroy(gpu.stream);
  return failures ? 1 : 0;
}
