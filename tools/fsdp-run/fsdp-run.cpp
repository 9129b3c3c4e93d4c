//===- fsdp-run.cpp - Execute an fsdpc plan on this rank ------------------===//
//
//   [mpirun -np N] fsdp-run plan.bin [--steps N] [--data DIR] [--seed S]
//       [--metrics-json FILE] [--save FILE.safetensors] [--init-from FILE.safetensors]
//       [--save-sharded DIR] [--load-sharded DIR] [--device auto|cpu|cuda]
//   fsdp-run forward.bin --forward --inputs DIR --outputs DIR
//
//===----------------------------------------------------------------------===//
#include "fsdpc/runtime/Checkpoint.h"
#include "fsdpc/runtime/Communicator.h"
#include "fsdpc/runtime/CpuDevice.h"
#include "fsdpc/runtime/CudaDevice.h"
#include "fsdpc/runtime/Dataset.h"
#include "fsdpc/runtime/Executor.h"
#include "fsdpc/runtime/KernelContract.h"
#include "fsdpc/runtime/LrSchedule.h"
#include "fsdpc/runtime/Npy.h"
#include "fsdpc/runtime/OnnxExport.h"
#include "fsdpc/runtime/PlanFile.h"
#include "fsdpc/runtime/Safetensors.h"
#include "fsdpc/runtime/Trace.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>
#include <cinttypes>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

using namespace fsdpc::runtime;
namespace plan = fsdpc::plan;
namespace contract = fsdpc::contract;

namespace {

constexpr int64_t kSyntheticSamples = 4096;

struct Options {
  std::string planPath;
  int64_t steps = 10;
  std::string dataDir;
  std::string metricsPath;
  std::string savePath;
  std::string saveOnnxPath;
  bool torchNames = false; // --save writes folded Linear weights under their torch names
  std::string onnxModel; // --save-onnx's source: the plan's source model unless given
  std::string initFrom;
  std::string init; // "normal:STD,SEED", parsed into initStd and initSeed
  double initStd = 0;
  uint64_t initSeed = 0;
  std::string saveShardedDir;
  std::string loadShardedDir;
  int64_t saveEvery = 0;  // 0: only after the run
  int64_t keepLast = 0;   // 0: keep every checkpoint
  bool resumeAuto = false;
  int64_t maxSteps = -1;  // -1: --steps counts the run's steps
  std::string evalDataDir;
  bool shuffle = false; // a new sample order every epoch, from --seed
  int64_t logEvery = 1;
  int64_t epochs = 0;   // 0: --steps or --max-steps set the length
  int64_t evalEvery = 0;    // 0: evaluate after the run only
  int64_t evalBatches = 0;  // 0: every whole batch of the eval data
  bool forward = false;
  bool profile = false;
  std::string device = "auto"; // auto, cpu or cuda
  std::string tracePath;
  std::string inputsDir;
  std::string outputsDir;
  uint64_t seed = 0;
  double collectiveTimeout = 300; // seconds; 0 waits forever
  bool skipNonfinite = false;     // undo a step whose loss or gradient norm is not finite
  bool checkNonfinite = false;    // name the first instruction that wrote a NaN or an infinity
  // Capture the step once as a CUDA graph and replay it: on by default (the
  // H200 ran GPT-2 0.6-0.7 ms faster per step so); --no-cuda-graph turns it
  // off. Said explicitly, a device that cannot capture gets a note.
  bool cudaGraph = true;
  bool cudaGraphSaid = false;
  bool help = false;
};

const char *kUsage = "usage: fsdp-run PLAN [--steps N] [--data DIR] [--seed S] [--metrics-json FILE]\n"
                     "                [--save FILE.safetensors] [--init-from FILE.safetensors | --init normal:STD,SEED]\n"
                     "                [--save-sharded DIR] [--load-sharded DIR] [--device auto|cpu|cuda]\n"
                     "  --steps N           run N more steps from where the run starts (default 10)\n"
                     "  --save FILE         after training, the full parameters (gathered to rank 0)\n"
                     "  --torch-names       with --save: folded Linear weights (onnx::MatMul_N) under\n"
                     "                      the torch names the graph proves, transposed back\n"
                     "  --save-onnx FILE    after training, the ONNX model the plan came from (found\n"
                     "                      next to the plan, or --onnx-model PATH) with its trained\n"
                     "                      initializers\n"
                     "  --init-from FILE    start from full parameters by name\n"
                     "  --init normal:STD,SEED  start from parameters drawn from N(0, STD^2), the same\n"
                     "                      for any world size (a --no-weights plan needs this or --init-from)\n"
                     "  --max-steps N       train until N steps are complete in all (a resumed run does\n"
                     "                      the rest), instead of --steps more; --epochs E: E passes\n"
                     "                      over the data in whole batches\n"
                     "  --data PATH         a directory of <input>.npy and <labels>.npy, or one token file\n"
                     "                      (.npy or .bin of token ids, memory-mapped) for a language model\n"
                     "  --shuffle           a new sample order every epoch (from --seed), the same on\n"
                     "                      every rank count\n"
                     "  --log-every N       a step line every N steps (default 1): loss, grad norm, time,\n"
                     "                      samples/s, tokens/s, lr, progress, ETA, memory; on a terminal a\n"
                     "                      progress bar between them\n"
                     "  --save-sharded DIR  a sharded checkpoint (each rank's shards, optimizer state and\n"
                     "                      step) in DIR/step-N after the run\n"
                     "  --save-every N      ... and after every N-th step; --keep-last K keeps the newest K\n"
                     "  --load-sharded DIR  resume from DIR's newest complete checkpoint, resharding it\n"
                     "                      when it was written on another world size or strategy\n"
                     "  --resume auto       resume from --save-sharded DIR's newest complete checkpoint\n"
                     "                      if there is one, else start fresh\n"
                     "  --eval-data DIR     after the run, and every --eval-every N steps, the mean loss of\n"
                     "                      the forward pass alone over --eval-batches M batches of DIR\n"
                     "                      (default: all whole batches)\n"
                     "  --profile           after training, print the time spent per kernel (rank 0)\n"
                     "  --device D          auto (default: cuda when a GPU is visible, else cpu), cpu or cuda\n"
                     "  --no-cuda-graph     on a GPU, launch every kernel each step instead of capturing\n"
                     "                      the step once as a CUDA graph and replaying it (the default,\n"
                     "                      --cuda-graph); --profile, --trace, --check-nonfinite and\n"
                     "                      ranks sharing a GPU run the step as it is anyway\n"
                     "  --check-nonfinite   with a non-finite loss, name the first instruction (and ONNX node)\n"
                     "                      that wrote a NaN or an infinity (checks every output: slower)\n"
                     "  --skip-nonfinite    undo a step whose loss or gradient norm is not finite and go on\n"
                     "                      (as a mixed-precision loss scaler skips it), instead of stopping\n"
                     "  --collective-timeout S  end the launch when a collective waits more than S seconds\n"
                     "                      for a rank that stalled or died (default 300; 0: wait forever)\n"
                     "  --trace FILE.json   a Chrome / Perfetto trace of every step: one track per rank and\n"
                     "                      stream, one slice per instruction (open it in ui.perfetto.dev)\n"
                     "  --forward           run a plan's forward pass once on --inputs DIR (<input>.npy;\n"
                     "                      a training plan on its world size, each rank its rows)\n"
                     "                      and write <output>.npy to --outputs DIR\n";

bool parseInteger(const char *text, int64_t &value) {
  if (!*text)
    return false;
  char *end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(text, &end, 10);
  if (*end || errno || parsed < 0)
    return false;
  value = parsed;
  return true;
}

Status parseOptions(int argc, char **argv, Options &options) {
  bool stepsGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasInlineValue = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      hasInlineValue = true;
    }
    auto takeValue = [&](std::string &out) -> Status {
      if (hasInlineValue) {
        out = value;
        return Status::ok();
      }
      if (i + 1 >= argc)
        return FSDPC_ERROR(kInvalidArgument, arg, " expects a value");
      out = argv[++i];
      return Status::ok();
    };
    if (arg == "--steps" || arg == "--seed" || arg == "--save-every" || arg == "--keep-last" || arg == "--max-steps" ||
        arg == "--eval-every" || arg == "--eval-batches" || arg == "--epochs" || arg == "--log-every") {
      std::string text;
      FSDPC_RETURN_IF_ERROR(takeValue(text));
      int64_t parsed;
      if (!parseInteger(text.c_str(), parsed))
        return FSDPC_ERROR(kInvalidArgument, arg, " expects a non-negative integer, got '", text, "'");
      if (arg == "--steps") {
        options.steps = parsed;
        stepsGiven = true;
      } else if (arg == "--seed") {
        options.seed = static_cast<uint64_t>(parsed);
      } else if (arg == "--save-every") {
        options.saveEvery = parsed;
      } else if (arg == "--keep-last") {
        options.keepLast = parsed;
      } else if (arg == "--eval-every") {
        options.evalEvery = parsed;
      } else if (arg == "--epochs") {
        options.epochs = parsed;
      } else if (arg == "--log-every") {
        if (parsed < 1)
          return FSDPC_ERROR(kInvalidArgument, "--log-every expects a positive integer, got '", text, "'");
        options.logEvery = parsed;
      } else if (arg == "--eval-batches") {
        options.evalBatches = parsed;
      } else {
        options.maxSteps = parsed;
      }
    } else if (arg == "--resume") {
      std::string text;
      FSDPC_RETURN_IF_ERROR(takeValue(text));
      if (text != "auto")
        return FSDPC_ERROR(kInvalidArgument, "--resume expects auto, got '", text, "' (--load-sharded DIR names one)");
      options.resumeAuto = true;
    } else if (arg == "--data") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.dataDir));
    } else if (arg == "--eval-data") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.evalDataDir));
    } else if (arg == "--metrics-json") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.metricsPath));
    } else if (arg == "--save") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.savePath));
    } else if (arg == "--save-onnx") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.saveOnnxPath));
    } else if (arg == "--onnx-model") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.onnxModel));
    } else if (arg == "--init-from") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.initFrom));
    } else if (arg == "--init") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.init));
    } else if (arg == "--save-sharded") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.saveShardedDir));
    } else if (arg == "--load-sharded") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.loadShardedDir));
    } else if (arg == "--torch-names") {
      options.torchNames = true;
    } else if (arg == "--shuffle") {
      options.shuffle = true;
    } else if (arg == "--profile") {
      options.profile = true;
    } else if (arg == "--check-nonfinite") {
      options.checkNonfinite = true;
    } else if (arg == "--cuda-graph" || arg == "--no-cuda-graph") {
      options.cudaGraph = arg == "--cuda-graph";
      options.cudaGraphSaid = true;
    } else if (arg == "--skip-nonfinite") {
      options.skipNonfinite = true;
    } else if (arg == "--collective-timeout") {
      std::string text;
      FSDPC_RETURN_IF_ERROR(takeValue(text));
      char *end = nullptr;
      const double seconds = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || !(seconds >= 0) || !std::isfinite(seconds))
        return FSDPC_ERROR(kInvalidArgument, "--collective-timeout expects seconds >= 0, got '", text, "'");
      options.collectiveTimeout = seconds;
    } else if (arg == "--trace") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.tracePath));
    } else if (arg == "--device") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.device));
      if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
        return FSDPC_ERROR(kInvalidArgument, "--device expects auto, cpu or cuda, got '", options.device, "'");
    } else if (arg == "--forward") {
      options.forward = true;
    } else if (arg == "--inputs") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.inputsDir));
    } else if (arg == "--outputs") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.outputsDir));
    } else if (arg == "--help" || arg == "-h") {
      options.help = true;
      return Status::ok();
    } else if (arg.rfind("-", 0) == 0) {
      return FSDPC_ERROR(kInvalidArgument, "unknown option '", arg, "'");
    } else if (options.planPath.empty()) {
      options.planPath = arg;
    } else {
      return FSDPC_ERROR(kInvalidArgument, "unexpected argument '", arg, "'");
    }
  }
  if (options.planPath.empty())
    return FSDPC_ERROR(kInvalidArgument, "no plan file given");
  if (options.forward && (options.inputsDir.empty() || options.outputsDir.empty()))
    return FSDPC_ERROR(kInvalidArgument, "--forward needs --inputs DIR and --outputs DIR");
  if (!options.init.empty()) {
    double std = -1;
    unsigned long long seed = 0;
    char tail = 0;
    if (std::sscanf(options.init.c_str(), "normal:%lf,%llu%c", &std, &seed, &tail) != 2 || !(std >= 0) ||
        !std::isfinite(std))
      return FSDPC_ERROR(kInvalidArgument, "--init expects normal:STD,SEED with a finite STD >= 0, got '", options.init,
                         "'");
    options.initStd = std;
    options.initSeed = seed;
    if (!options.initFrom.empty())
      return FSDPC_ERROR(kInvalidArgument, "--init and --init-from both set the parameters; pass one");
  }
  if (!options.initFrom.empty() && !options.loadShardedDir.empty())
    return FSDPC_ERROR(kInvalidArgument, "--init-from and --load-sharded both set the parameters; pass one");
  if (options.epochs > 0 && (stepsGiven || options.maxSteps >= 0))
    return FSDPC_ERROR(kInvalidArgument, "--epochs sets the length as --steps and --max-steps do; pass one");
  if (stepsGiven && options.maxSteps >= 0)
    return FSDPC_ERROR(kInvalidArgument, "--steps (more steps) and --max-steps (steps in all) both set the length; pass one");
  if ((options.saveEvery > 0 || options.keepLast > 0 || options.resumeAuto) && options.saveShardedDir.empty())
    return FSDPC_ERROR(kInvalidArgument, "--save-every, --keep-last and --resume auto need --save-sharded DIR");
  if ((options.evalEvery > 0 || options.evalBatches > 0) && options.evalDataDir.empty())
    return FSDPC_ERROR(kInvalidArgument, "--eval-every and --eval-batches need --eval-data DIR");
  if (options.resumeAuto && !options.loadShardedDir.empty())
    return FSDPC_ERROR(kInvalidArgument, "--resume auto resumes from --save-sharded DIR; it does not take --load-sharded");
  return Status::ok();
}

/// Rank 0 writes --save, --save-onnx and --trace after the run: a directory
/// that is not there should stop the launch, not the end of a long run.
Status checkOutputDirectories(const Options &options) {
  for (const auto &[flag, path] : {std::pair<const char *, const std::string &>{"--save", options.savePath},
                                   {"--save-onnx", options.saveOnnxPath},
                                   {"--trace", options.tracePath}}) {
    if (path.empty())
      continue;
    const size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    struct stat info;
    if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
      return FSDPC_ERROR(kInvalidArgument, flag, " '", path, "': directory '", dir, "' does not exist");
  }
  return Status::ok();
}

/// The forward pass of a training plan on its world size: each rank reads
/// its rows of every `<inputs>/<name>.npy` (the global batch; labels may be
/// left out and read as zeros), runs the plan's forward prefix, and rank 0
/// writes the model output of all ranks, in rank order, to
/// `<outputs>/<name>.npy`. The parameters do not change.
Status runForwardOfTrainingPlan(Executor &executor, const Options &options, HostControl &control) {
  const plan::PlanHeader &h = executor.header();
  const int rank = control.rank(), world = control.worldSize();
  // With gradient accumulation the forward pass is the first micro-batch's
  // only: its output has fewer rows than the inputs.
  const plan::Tensor &output = h.tensors(h.forward_output_tensor());
  for (int id : executor.inputTensors())
    if (output.shape_size() == 0 || h.tensors(id).shape_size() == 0 || h.tensors(id).shape(0) != output.shape(0))
      return FSDPC_ERROR(kInvalidArgument, "--forward on a training plan needs one micro-batch per step (compile ",
                         "without --grad-accum)");
  int64_t localBatch = -1;
  for (int id : executor.inputTensors()) {
    const plan::Tensor &tensor = h.tensors(id);
    std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
    if (shape.empty())
      return FSDPC_ERROR(kInvalidArgument, "plan input '", tensor.name(), "' has no batch dimension");
    const std::string path = options.inputsDir + "/" + tensor.name() + ".npy";
    const size_t rowBytes = numElements(tensor) / shape[0] * dtypeSize(tensor.dtype());
    std::vector<uint8_t> local(shape[0] * rowBytes, 0);
    FILE *probe = std::fopen(path.c_str(), "rb");
    if (probe)
      std::fclose(probe);
    if (probe || !tensor.label()) {
      StatusOr<HostArray> array = readNpy(path);
      if (!array.isOk())
        return array.status();
      std::vector<int64_t> global = shape;
      global[0] *= world;
      if (array->shape != global || array->dtype != tensor.dtype())
        return FSDPC_ERROR(kInvalidArgument, "'", path, "' must hold the global batch of the plan input '",
                           tensor.name(), "': ", global[0], " rows of its per-sample shape and dtype");
      std::memcpy(local.data(), array->bytes.data() + rank * local.size(), local.size());
    }
    if (!tensor.label())
      localBatch = shape[0];
    FSDPC_RETURN_IF_ERROR(executor.uploadTensor(id, local.data(), local.size()));
  }
  FSDPC_RETURN_IF_ERROR(executor.runForwardToOutput(0));
  StatusOr<HostArray> out = executor.downloadTensor(h.forward_output_tensor());
  if (!out.isOk())
    return out.status();
  if (out->dtype != plan::F32)
    return FSDPC_ERROR(kUnimplemented, "--forward writes f32 outputs; this plan's '", h.forward_output_name(),
                       "' is stored in another dtype (compile without --mixed-precision)");
  if (out->shape.empty() || out->shape[0] != localBatch)
    return FSDPC_ERROR(kInvalidArgument, "--forward on a training plan needs one micro-batch per step (compile ",
                       "without --grad-accum)");
  std::vector<uint8_t> all(out->bytes.size() * world);
  FSDPC_RETURN_IF_ERROR(control.allGatherBytes(out->bytes.data(), all.data(), out->bytes.size()));
  if (rank == 0) {
    HostArray full = *out;
    full.shape[0] *= world;
    full.bytes = std::move(all);
    FSDPC_RETURN_IF_ERROR(writeNpy(full, options.outputsDir + "/" + h.forward_output_name() + ".npy"));
  }
  return Status::ok();
}

/// One forward pass of a --forward-only plan: every input from
/// `<inputs>/<name>.npy`, with exactly the plan's shape and dtype, and every
/// output to `<outputs>/<name>.npy`.
Status runForward(Executor &executor, const Options &options) {
  const plan::PlanHeader &header = executor.header();
  if (header.output_tensors().empty())
    return FSDPC_ERROR(kInvalidArgument, "plan '", options.planPath, "' has no forward pass to run: compile it with ",
                       "fsdpc --forward-only, or as a training plan");
  for (int id : executor.inputTensors()) {
    const plan::Tensor &tensor = header.tensors(id);
    std::string path = options.inputsDir + "/" + tensor.name() + ".npy";
    StatusOr<HostArray> array = readNpy(path);
    if (!array.isOk())
      return array.status();
    std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
    if (array->shape != shape || array->dtype != tensor.dtype())
      return FSDPC_ERROR(kInvalidArgument, "'", path, "' does not have the shape and dtype of the plan input '",
                         tensor.name(), "'");
    FSDPC_RETURN_IF_ERROR(executor.uploadTensor(id, array->bytes.data(), array->bytes.size()));
  }
  StatusOr<float> ran = executor.runStep(1);
  if (!ran.isOk())
    return ran.status();
  for (int id : header.output_tensors()) {
    StatusOr<HostArray> array = executor.downloadTensor(id);
    if (!array.isOk())
      return array.status();
    FSDPC_RETURN_IF_ERROR(writeNpy(*array, options.outputsDir + "/" + header.tensors(id).name() + ".npy"));
  }
  return Status::ok();
}

/// Set once the launch's ranks are known, so errors say which rank failed
/// and every rank leaves MPI together.
Communicator *communicator = nullptr;

int fail(const Status &status) {
  if (communicator && communicator->worldSize() > 1) {
    std::fprintf(stderr, "fsdp-run: error: rank %d: %s\n", communicator->rank(), status.toString().c_str());
    // The other ranks may be waiting in a collective this rank will never
    // join (its --metrics-json failed, its plan was another): end them all
    // now rather than leave them hanging. A moment first, so that ranks
    // failing the same way (a plan for another world size) print theirs.
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    communicator->abortAll(1);
  } else {
    std::fprintf(stderr, "fsdp-run: error: %s\n", status.toString().c_str());
  }
  if (communicator)
    communicator->finish();
  return 1;
}

/// A number as JSON has it: NaN and infinities are not JSON, so null.
std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

/// Every rank's tensor regions come from its device's memory pool: the
/// host's memory on the CPU device, a GPU's on the CUDA device, where
/// several ranks may share one GPU. The ranks sharing a pool sum what they
/// will allocate and refuse, with the plan's numbers, when it cannot fit
/// (two ranks of 13 GB on a 23 GB machine were once ended by the OOM
/// killer with no message).
Status checkMemoryFits(HostControl &control, const Device &device, const plan::PlanHeader &h) {
  const MemoryPool pool = device.memoryPool();
  struct Claim {
    char pool[128];
    uint64_t bytes;
  } mine = {};
  std::snprintf(mine.pool, sizeof(mine.pool), "%s", pool.id.c_str());
  mine.bytes = h.persistent_bytes() + h.transient_bytes() + (pool.holdsHostRegion ? h.host_bytes() : 0);
  std::vector<Claim> claims(control.worldSize());
  FSDPC_RETURN_IF_ERROR(control.allGatherBytes(&mine, claims.data(), sizeof(Claim)));
  uint64_t total = 0;
  int sharing = 0;
  for (const Claim &claim : claims)
    if (std::strncmp(claim.pool, mine.pool, sizeof(mine.pool)) == 0) {
      total += claim.bytes;
      ++sharing;
    }
  if (pool.availableBytes == 0 || total <= pool.availableBytes)
    return Status::ok();
  char text[512];
  std::snprintf(text, sizeof(text),
                "the %d rank(s) on %s need %.2f GiB of tensor memory (%.2f GiB each: the plan's persistent%s "
                "transient regions) but it has %.2f GiB available",
                sharing, pool.description.c_str(), total / 1073741824.0, mine.bytes / 1073741824.0,
                pool.holdsHostRegion && h.host_bytes() > 0 ? ", host and" : " and", pool.availableBytes / 1073741824.0);
  return FSDPC_ERROR(kInvalidArgument, text,
                     "; start fewer ranks per host or GPU, or compile with a smaller --batch-size or more "
                     "--world-size");
}

/// The plan's learning-rate schedule: the first optimizer update's lr and
/// schedule (every unit's update shares one configuration), read once;
/// a plan without an update has lr 0.
struct PlanSchedule {
  double lr = 0, minLr = 0;
  int kind = kLrConstant;
  int64_t warmup = 0, total = 0;

  explicit PlanSchedule(const plan::PlanHeader &header) {
    for (const plan::Instruction &inst : header.instructions()) {
      if (inst.op() != "adamw_update" && inst.op() != "sgd_update")
        continue;
      const DecodedParams params = decodeParams(inst);
      auto get = [&](contract::Param p) -> const ParamValue & { return params[static_cast<size_t>(p)]; };
      const ParamValue &schedule = get(contract::Param::kLrSchedule);
      const int named = lrScheduleKind(schedule.present ? schedule.s : "constant");
      lr = get(contract::Param::kLr).f;
      kind = named < 0 ? kLrConstant : named;
      warmup = get(contract::Param::kWarmupSteps).i;
      total = get(contract::Param::kTotalSteps).i;
      minLr = get(contract::Param::kMinLr).f;
      return;
    }
  }
  /// The learning rate step `step` (1-based) uses.
  double at(int64_t step) const { return scheduledLr(lr, kind, warmup, total, minLr, step); }
};

} // namespace

int main(int argc, char **argv) {
  StatusOr<std::unique_ptr<Communicator>> launched = createCommunicator(&argc, &argv);
  if (!launched.isOk())
    return fail(launched.status());
  communicator = launched->get();
  Options options;
  Status parsed = parseOptions(argc, argv, options);
  if (!parsed.isOk()) {
    std::fputs(kUsage, stderr);
    return fail(parsed);
  }
  if (Status outputs = communicator->rank() == 0 ? checkOutputDirectories(options) : Status::ok(); !outputs.isOk())
    return fail(outputs); // aborts the other ranks too
  communicator->setCollectiveTimeout(options.collectiveTimeout);
  if (options.help) {
    // Through finish(), not exit(): under mpirun every rank must leave MPI.
    std::fputs(kUsage, stdout);
    communicator->finish();
    return 0;
  }

  StatusOr<PlanFile> loaded = readPlanFile(options.planPath);
  if (!loaded.isOk())
    return fail(loaded.status());
  const uint64_t planHash = loaded->contentHash;
  const int rank = communicator->rank(), worldSize = communicator->worldSize();
  // Every rank sees the same sizes, so all refuse together, before any
  // collective could hang.
  if (loaded->header.world_size() != static_cast<uint32_t>(worldSize))
    return fail(FSDPC_ERROR(kInvalidArgument, "plan '", options.planPath, "' was compiled for world size ",
                            loaded->header.world_size(), " but this launch has ", worldSize, " rank(s)"));
  Status samePlan = communicator->agreeOn(planHash, "the plan's content hash");
  if (!samePlan.isOk())
    return fail(samePlan);
  // The device: the GPU of this rank when asked for or, by default, when
  // one is visible; every rank must take the same kind.
  const bool useCuda = options.device == "cuda" || (options.device == "auto" && cudaDeviceCount() > 0);
  Status sameDevice = communicator->agreeOn(useCuda ? 1 : 0, "the device kind (cpu or cuda)");
  if (!sameDevice.isOk())
    return fail(sameDevice);
  std::unique_ptr<Device> device;
  if (useCuda) {
    StatusOr<std::unique_ptr<Device>> cudaDevice = createCudaDevice(communicator);
    if (!cudaDevice.isOk())
      return fail(cudaDevice.status());
    device = std::move(*cudaDevice);
  } else {
    device = createCpuDevice();
  }
  if (rank == 0)
    std::printf("fsdp-run: device %s\n", device->name().c_str());
  // --offload keeps state in the plan's host region. On the CPU device
  // that is host memory like every region: the copies are memcpy and the
  // numbers are the same as without it.
  if (!loaded->header.offload().empty() && rank == 0) {
    if (useCuda)
      std::printf("fsdp-run: --offload %s: %.1f MiB in pinned host memory; the optimizer step runs on the host\n",
                  loaded->header.offload().c_str(), loaded->header.host_bytes() / 1048576.0);
    else
      std::printf("fsdp-run: note: --offload %s changes nothing on the CPU device: all state is in host memory "
                  "already\n",
                  loaded->header.offload().c_str());
  }
  Status fits = checkMemoryFits(*communicator, *device, loaded->header);
  if (!fits.isOk())
    return fail(fits);
  StatusOr<std::unique_ptr<Executor>> created =
      Executor::create(std::move(*loaded), std::move(device), communicator, communicator);
  if (!created.isOk())
    return fail(created.status());
  Executor &executor = **created;
  const plan::PlanHeader &header = executor.header();

  // Where the run resumes from: --load-sharded, or with --resume auto the
  // checkpoint directory once it holds a complete checkpoint (every rank
  // must see the same).
  std::string resumeDir = options.loadShardedDir;
  if (options.resumeAuto) {
    const int64_t newest = newestCompleteCheckpoint(options.saveShardedDir);
    Status agreed = communicator->agreeOn(static_cast<uint64_t>(newest + 1), "the newest complete checkpoint");
    if (!agreed.isOk())
      return fail(agreed);
    if (newest >= 0)
      resumeDir = options.saveShardedDir;
    else if (rank == 0)
      std::printf("fsdp-run: --resume auto: no complete checkpoint in %s yet, starting from the beginning\n",
                  options.saveShardedDir.c_str());
  }

  // Parameters from a file or drawn, before a forward pass or training (a
  // resumed run takes them from its checkpoint).
  if (!resumeDir.empty()) {
  } else if (!options.initFrom.empty()) {
    StatusOr<NamedArrays> full = readSafetensors(options.initFrom);
    Status initialized = full.isOk() ? executor.loadFullParameters(*full) : full.status();
    if (!initialized.isOk())
      return fail(Status::error(initialized.code(), "--init-from '" + options.initFrom + "': " + initialized.message(),
                                initialized.file(), initialized.line()));
  } else if (!options.init.empty()) {
    Status initialized =
        executor.loadFullParameters(normalInitialParameters(header, options.initStd, options.initSeed));
    if (!initialized.isOk())
      return fail(initialized);
  } else if (header.weights_omitted() && resumeDir.empty()) {
    return fail(FSDPC_ERROR(kInvalidArgument, "plan '", options.planPath,
                            "' was compiled with --no-weights: pass --init-from FILE.safetensors or --init "
                            "normal:STD,SEED"));
  }

  if (!options.forward && header.loss_tensor() < 0)
    return fail(FSDPC_ERROR(kInvalidArgument, "plan '", options.planPath,
                            "' was compiled with --forward-only: it has no loss to train; run it with --forward "
                            "--inputs DIR --outputs DIR"));
  if (options.forward) {
    Status ran = header.output_tensors().empty() && header.has_forward_output_tensor()
                     ? runForwardOfTrainingPlan(executor, options, *communicator)
                     : runForward(executor, options);
    if (!ran.isOk())
      return fail(ran);
    communicator->finish();
    return 0;
  }

  // --profile times every instruction, which a replayed graph cannot: the
  // step runs as it is, profiled from its second step (below).
  if (options.profile)
    options.cudaGraph = false;
  if (options.checkNonfinite && !executor.enableNonfiniteCheck())
    return fail(FSDPC_ERROR(kUnimplemented, "--check-nonfinite: the device ", executor.device().name(), " cannot check its outputs"));
  if (!options.tracePath.empty())
    executor.enableTracing();
  if (options.cudaGraph && !executor.enableStepCapture() && options.cudaGraphSaid && rank == 0)
    std::printf("fsdp-run: note: --cuda-graph changes nothing on the device %s, which runs the step as it is\n",
                executor.device().name().c_str());
  TraceRecorder trace(header);
  int64_t firstStep = 0;
  if (!resumeDir.empty()) {
    StatusOr<int64_t> resumed = loadShardedCheckpoint(resumeDir, executor, *communicator, planHash);
    if (!resumed.isOk())
      return fail(resumed.status());
    firstStep = *resumed;
  }
  // --max-steps counts from the start of training, --steps from here.
  if (options.maxSteps < 0 && options.steps > INT64_MAX - firstStep)
    return fail(FSDPC_ERROR(kInvalidArgument, "--steps ", options.steps, " after step ", firstStep,
                            " would pass step 2^63 - 1; use --max-steps for the total"));
  int64_t endStep = options.maxSteps >= 0 ? std::max(options.maxSteps, firstStep) : firstStep + options.steps;
  int64_t savedAfter = -1;
  auto saveCheckpoint = [&](int64_t completed) -> Status {
    FSDPC_RETURN_IF_ERROR(saveShardedCheckpoint(options.saveShardedDir, executor, *communicator, completed, planHash,
                                                options.keepLast));
    savedAfter = completed;
    if (rank == 0) {
      std::printf("fsdp-run: saved a sharded checkpoint after step %" PRId64 " to %s\n", completed,
                  options.saveShardedDir.c_str());
      std::fflush(stdout);
    }
    return Status::ok();
  };

  // A directory of .npy files, or one token file (memory-mapped).
  auto openData = [&](const std::string &path) -> StatusOr<std::unique_ptr<Dataset>> {
    struct stat info;
    if (::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode))
      return Dataset::fromTokenFile(path, executor);
    return Dataset::fromNpyDirectory(path, executor);
  };
  StatusOr<std::unique_ptr<Dataset>> dataset = options.dataDir.empty()
                                                    ? Dataset::synthetic(executor, options.seed, kSyntheticSamples)
                                                    : openData(options.dataDir);
  if (!dataset.isOk())
    return fail(dataset.status());
  if (options.shuffle)
    (*dataset)->shuffleEveryEpoch(options.seed);
  if (options.epochs > 0) // whole batches of every epoch, as drop_last
    endStep = std::max(options.epochs * (*dataset)->numSamples() / std::max<int64_t>(header.global_batch(), 1),
                       firstStep);
  if (rank == 0 && (*dataset)->numSamples() < header.global_batch())
    std::fprintf(stderr,
                 "fsdp-run: warning: the data holds %" PRId64 " samples, fewer than the global batch of %" PRId64
                 ": every batch repeats samples\n",
                 (*dataset)->numSamples(), header.global_batch());
  // --profile leaves the first step out where there are more: it makes the
  // GEMMs' descriptors and picks their algorithms between the launches.
  const int64_t profiledFrom = !options.profile                               ? -1
                               : endStep - firstStep < 2 ? firstStep
                                                         : firstStep + 1;
  // Every rank must run the same steps and the same collectives between
  // them (checkpoints, evaluations): ranks given different --steps once
  // crashed in MPI. Agreed once, before the first step.
  {
    uint64_t schedule = 0xcbf29ce484222325ULL;
    for (int64_t value : {endStep, options.saveEvery, options.evalEvery, options.evalBatches, options.keepLast,
                          static_cast<int64_t>(options.evalDataDir.empty()),
                          static_cast<int64_t>(options.saveShardedDir.empty()),
                          static_cast<int64_t>(options.savePath.empty()), static_cast<int64_t>(options.tracePath.empty())})
      schedule = fnv1a64(&value, sizeof(value), schedule);
    Status sameSchedule = communicator->agreeOn(
        schedule, "the run's steps and schedule (--steps, --max-steps, --epochs, --save-every, --eval-every, "
                  "--eval-batches, --keep-last, --eval-data, --save-sharded, --save, --trace)");
    if (!sameSchedule.isOk())
      return fail(sameSchedule);
  }
  std::unique_ptr<Dataset> evalData;
  if (!options.evalDataDir.empty()) {
    StatusOr<std::unique_ptr<Dataset>> read = openData(options.evalDataDir);
    if (!read.isOk())
      return fail(read.status());
    evalData = std::move(*read);
  }

  FILE *metrics = nullptr;
  const bool reports = rank == 0;
  if (reports && !options.metricsPath.empty()) {
    metrics = std::fopen(options.metricsPath.c_str(), "w");
    if (!metrics)
      return fail(FSDPC_ERROR(kInvalidArgument, "cannot write --metrics-json file '", options.metricsPath, "': ",
                              std::strerror(errno)));
  }

  if (reports)
    std::printf("fsdp-run: %s: %" PRId64 " parameters, world size %u (%s, shard group %d), global batch %" PRId64
                ", %s, planned tensor memory %.2f MiB per rank, data: %s%s\n",
                options.planPath.c_str(), countTrainableParameters(header), header.world_size(),
                header.strategy().empty() ? "unsharded" : header.strategy().c_str(),
                std::max(header.shard_group_size(), 1), header.global_batch(), header.optimizer().c_str(),
                executor.tensorBytes() / 1048576.0, options.dataDir.empty() ? "synthetic" : options.dataDir.c_str(),
                firstStep ? (", resuming after step " + std::to_string(firstStep)).c_str() : "");
  // The trace's clock starts on every rank as they leave this agreement
  // together, so the ranks' tracks line up.
  if (!options.tracePath.empty()) {
    Status together = communicator->agreeOn(1, "the start of the trace");
    if (!together.isOk())
      return fail(together);
  }
  const PlanSchedule schedule(header);
  // Tokens per sample: the label positions of a sample (T for a language
  // model, 1 for a classifier), those of the first labels where a loss
  // reads several.
  double tokensPerSample = 1;
  for (int t : executor.inputTensors())
    if (header.tensors(t).label()) {
      for (int d = 1; d < header.tensors(t).shape_size(); ++d)
        tokensPerSample *= header.tensors(t).shape(d);
      break;
    }
  // A bar only for a plain process on a terminal: OpenMPI hands its ranks a
  // pseudo-terminal even when mpirun's own output is a file or a pipe.
  const bool progressBar = worldSize == 1 && ::isatty(::fileno(stdout));
  // Evaluation: the plan's forward pass on eval batches 0 .. M-1, the loss
  // averaged over ranks (each its slice) and then over the batches.
  const int64_t evalBatches =
      options.evalBatches > 0 ? options.evalBatches
      : evalData              ? std::max<int64_t>(evalData->numSamples() / std::max<int64_t>(header.global_batch(), 1), 1)
                              : 0;
  auto evaluate = [&](int64_t completed) -> Status {
    double total = 0;
    for (int64_t batch = 0; batch < evalBatches; ++batch) {
      FSDPC_RETURN_IF_ERROR(evalData->fillBatch(executor, batch, rank, worldSize));
      StatusOr<float> loss = executor.runForwardPass(completed);
      if (!loss.isOk())
        return loss.status();
      float mean = *loss;
      if (worldSize > 1)
        FSDPC_RETURN_IF_ERROR(communicator->allReduceHostFloats(&mean, 1, Reduction::kAvg));
      total += mean;
    }
    const double evalLoss = total / static_cast<double>(evalBatches);
    if (rank == 0) {
      std::printf("eval after step %" PRId64 " eval_loss %.9g (%" PRId64 " batches)\n", completed, evalLoss,
                  evalBatches);
      std::fflush(stdout);
    }
    if (metrics)
      std::fprintf(metrics, "{\"step\": %" PRId64 ", \"eval_loss\": %s, \"eval_batches\": %" PRId64 "}\n",
                   completed - 1, jsonNumber(evalLoss).c_str(), evalBatches);
    return Status::ok();
  };
  int64_t evaluatedAfter = -1;
  const auto runStart = std::chrono::steady_clock::now();
  for (int64_t step = firstStep; step < endStep; ++step) {
    if (step == profiledFrom)
      executor.enableProfiling();
    auto start = std::chrono::steady_clock::now();
    Status filled = (*dataset)->fillBatch(executor, step, rank, worldSize);
    if (!filled.isOk())
      return fail(filled);
    const double stepBegin = std::chrono::duration<double>(std::chrono::steady_clock::now() - runStart).count();
    // With --skip-nonfinite, this rank's state before the step (parameter
    // and optimizer shards, the step counter), to undo an update that a
    // non-finite loss poisoned.
    StatusOr<NamedArrays> before = options.skipNonfinite ? executor.localState() : StatusOr<NamedArrays>(NamedArrays{});
    if (!before.isOk())
      return fail(before.status());
    StatusOr<float> loss = executor.runStep(step + 1);
    if (!loss.isOk())
      return fail(loss.status());
    const double exposedCommMs = executor.lastStepExposedCommSeconds() * 1000;
    if (!options.tracePath.empty())
      trace.addStep(step, stepBegin, executor.lastStepTrace());
    if (worldSize > 1) {
      // Every rank's loss is the mean over its equal slice of the batch.
      Status reduced = communicator->allReduceHostFloats(&*loss, 1, Reduction::kAvg);
      if (!reduced.isOk())
        return fail(reduced);
    }
    // With clipping, the global norm before clipping (every rank has it).
    std::string gradNorm;
    float gradNormValue = 0;
    if (executor.clipsGradients()) {
      StatusOr<float> norm = executor.lastGradNorm();
      if (!norm.isOk())
        return fail(norm.status());
      gradNormValue = *norm;
      char text[32];
      std::snprintf(text, sizeof(text), "%.9g", gradNormValue);
      gradNorm = text;
    }
    // A non-finite loss or gradient norm has already poisoned this step's
    // update: stop before anything is saved, so the last checkpoint and
    // --save files stay good. Every rank has the same (averaged) loss and
    // global norm, so all stop here together.
    const bool normBad = executor.clipsGradients() && !std::isfinite(gradNormValue);
    if ((!std::isfinite(*loss) || normBad) && options.skipNonfinite) {
      Status undone = executor.loadLocalState(*before);
      if (!undone.isOk())
        return fail(undone);
      if (reports) {
        std::printf("step %" PRId64 " loss %s skipped: the %s is not finite; its update is undone\n", step,
                    jsonNumber(*loss).c_str(), normBad ? "gradient norm" : "loss");
        std::fflush(stdout);
      }
      if (metrics)
        std::fprintf(metrics, "{\"step\": %" PRId64 ", \"total_steps\": %" PRId64 ", \"loss\": %s, \"skipped\": true}\n",
                     step, endStep, jsonNumber(*loss).c_str());
      continue;
    }
    if (!std::isfinite(*loss) || normBad) {
      if (metrics) {
        std::fprintf(metrics, "{\"step\": %" PRId64 ", \"total_steps\": %" PRId64 ", \"loss\": %s%s%s}\n", step, endStep,
                     jsonNumber(*loss).c_str(), gradNorm.empty() ? "" : ", \"grad_norm\": ",
                     gradNorm.empty() ? "" : jsonNumber(gradNormValue).c_str());
        std::fclose(metrics);
        metrics = nullptr;
      }
      // Each rank's first non-finite instruction; rank 0 names its own.
      const std::string source = options.checkNonfinite ? executor.firstNonfinite() : "";
      if (rank == 0) {
        const std::string value = normBad ? gradNorm : std::isnan(*loss) ? "nan" : *loss > 0 ? "inf" : "-inf";
        std::fprintf(stderr,
                     "fsdp-run: error: step %" PRId64 ": the %s is %s; stopping without saving this step's parameters "
                     "(try a lower --lr, --clip-grad-norm, inputs without NaN, or --skip-nonfinite)%s%s\n",
                     step, normBad ? "gradient norm" : "loss", value.c_str(),
                     source.empty() ? (options.checkNonfinite ? "; on rank 0 every instruction wrote finite values"
                                                              : "")
                                    : "; the first non-finite value on rank 0 came from ",
                     source.c_str());
      }
      communicator->finish();
      return 1;
    }
    double stepMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double samplesPerSecond = header.global_batch() / (stepMs / 1000.0);
    // Progress: the steps done in this run so far give the time per step.
    const int64_t done = step + 1 - firstStep, left = endStep - step - 1;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - runStart).count();
    const double etaSeconds = done > 0 ? elapsed / done * left : 0;
    const double memoryMiB = executor.residentTensorBytes() / 1048576.0;
    char eta[32];
    std::snprintf(eta, sizeof(eta), "%d:%02d:%02d", static_cast<int>(etaSeconds / 3600),
                  static_cast<int>(etaSeconds / 60) % 60, static_cast<int>(etaSeconds) % 60);
    const bool logged = (step + 1 - firstStep) % options.logEvery == 0 || step + 1 == endStep;
    if (reports && logged) {
      if (progressBar)
        std::printf("\r\033[K");
      std::printf("step %" PRId64 " loss %.9g%s%s step_ms %.3f samples_per_s %.1f tokens_per_s %.0f lr %.6g "
                  "progress %" PRId64 "/%" PRId64 " eta %s memory %.1fMiB\n",
                  step, *loss, gradNorm.empty() ? "" : " grad_norm ", gradNorm.c_str(), stepMs, samplesPerSecond,
                  samplesPerSecond * tokensPerSample, schedule.at(step + 1), step + 1, endStep, eta, memoryMiB);
      std::fflush(stdout);
    } else if (reports && progressBar) {
      // On a terminal, one line redrawn between the logged ones.
      const int width = 30, filled = static_cast<int>(width * (step + 1) / std::max<int64_t>(endStep, 1));
      std::printf("\r\033[K[%s%s] %" PRId64 "/%" PRId64 " loss %.4g eta %s", std::string(filled, '#').c_str(),
                  std::string(width - filled, ' ').c_str(), step + 1, endStep, *loss, eta);
      std::fflush(stdout);
    }
    if (metrics)
      std::fprintf(metrics,
                   "{\"step\": %" PRId64 ", \"total_steps\": %" PRId64 ", \"loss\": %s, \"step_ms\": %.4f, "
                   "\"samples_per_s\": %.2f, \"tokens_per_s\": %.1f, \"exposed_comm_ms\": %.4f, \"lr\": %.9g, "
                   "\"eta_s\": %.1f, \"memory_bytes\": %" PRIu64 "%s%s}\n",
                   step, endStep, jsonNumber(*loss).c_str(), stepMs, samplesPerSecond, samplesPerSecond * tokensPerSample,
                   exposedCommMs,
                   schedule.at(step + 1), etaSeconds, executor.residentTensorBytes(),
                   gradNorm.empty() ? "" : ", \"grad_norm\": ", gradNorm.c_str());
    if (evalData && options.evalEvery > 0 && (step + 1) % options.evalEvery == 0) {
      Status evaluated = evaluate(step + 1);
      if (!evaluated.isOk())
        return fail(evaluated);
      evaluatedAfter = step + 1;
    }
    if (options.saveEvery > 0 && (step + 1) % options.saveEvery == 0) {
      if (metrics)
        std::fflush(metrics); // what the checkpoint covers is on disk too
      Status saved = saveCheckpoint(step + 1);
      if (!saved.isOk())
        return fail(saved);
    }
  }
  if (evalData && evaluatedAfter != endStep) {
    Status evaluated = evaluate(endStep);
    if (!evaluated.isOk())
      return fail(evaluated);
  }

  if (!options.tracePath.empty()) {
    Status written = trace.write(options.tracePath, communicator);
    if (!written.isOk())
      return fail(written);
    if (reports)
      std::printf("fsdp-run: wrote the trace of %" PRId64 " steps to %s (open it in ui.perfetto.dev)\n",
                  endStep - firstStep, options.tracePath.c_str());
  }

  if (options.profile && reports) {
    // The rates say how far each kernel is from the device's peak: GEMMs
    // and attention against its TFLOP/s, the rest against its bandwidth.
    const std::vector<KernelProfile> rows = executor.profile(endStep - profiledFrom);
    double total = 0;
    for (const KernelProfile &row : rows)
      total += row.seconds;
    std::printf("fsdp-run: time per kernel over %" PRId64 " steps (rank 0%s):\n", endStep - profiledFrom,
                profiledFrom > firstStep ? ", after the first" : "");
    std::printf("  %-28s %7s %12s %6s %9s %9s\n", "kernel", "calls", "time", "share", "TFLOP/s", "GB/s");
    for (const KernelProfile &row : rows) {
      const double seconds = std::max(row.seconds, 1e-12);
      char tflops[32] = "";
      if (row.flops > 0)
        std::snprintf(tflops, sizeof(tflops), "%9.2f", row.flops / seconds / 1e12);
      std::printf("  %-28s %7" PRId64 " %9.3f ms %5.1f%% %9s %9.1f\n", row.op.c_str(), row.calls, row.seconds * 1000,
                  100 * row.seconds / std::max(total, 1e-12), tflops, row.bytes / seconds / 1e9);
    }
    std::printf("  (TFLOP/s: GEMMs' 2 M N K, attention's every query-key pair, which a causal mask halves; GB/s: the "
                "bytes of each call's operands)\n");
    // Which shapes of those kernels: the slowest instructions, per step.
    std::printf("fsdp-run: slowest instructions (per step):\n");
    std::printf("  %5s %-28s %9s %9s  %s\n", "#", "kernel", "time", "TFLOP/s", "operands [ONNX node]");
    for (const InstructionProfile &row : executor.slowestInstructions(endStep - profiledFrom, 12)) {
      char tflops[32] = "";
      if (row.flopsPerCall > 0)
        std::snprintf(tflops, sizeof(tflops), "%9.2f", row.flopsPerCall / std::max(row.secondsPerCall, 1e-12) / 1e12);
      // A fused instruction names every node it came from: the first says which.
      std::string node = row.location.substr(0, row.location.find(','));
      if (node.size() < row.location.size())
        node += ", ...";
      std::printf("  %5d %-28s %6.3f ms %9s  %s%s%s%s\n", row.index, row.op.c_str(), row.secondsPerCall * 1000, tflops,
                  row.operands.c_str(), node.empty() ? "" : " [", node.c_str(), node.empty() ? "" : "]");
    }
  }

  // Tensor memory: what the plan reserved and the pages really touched, per
  // rank, and the device memory besides (kernel scratch, library
  // workspaces), collected on rank 0 (as KiB, exact in a float up to 16 GiB).
  std::vector<float> residentKiB(2 * worldSize, 0.0f);
  const float localKiB[2] = {static_cast<float>(executor.residentTensorBytes() / 1024),
                             static_cast<float>(executor.device().auxiliaryBytes() / 1024)};
  Status gathered = communicator->allGatherBytes(localKiB, residentKiB.data(), sizeof(localKiB));
  if (!gathered.isOk())
    return fail(gathered);
  if (reports) {
    for (int r = 0; r < worldSize; ++r) {
      const uint64_t measured = static_cast<uint64_t>(residentKiB[2 * r]) * 1024;
      const uint64_t auxiliary = static_cast<uint64_t>(residentKiB[2 * r + 1]) * 1024;
      std::printf("fsdp-run: rank %d tensor memory: measured peak %.3f MiB, planned %.3f MiB\n", r,
                  measured / 1048576.0, executor.tensorBytes() / 1048576.0);
      if (auxiliary > 0)
        std::printf("fsdp-run: rank %d also holds %.3f MiB of kernel scratch and cuBLASLt workspace, which the plan "
                    "does not count\n",
                    r, auxiliary / 1048576.0);
      // The host region (--offload) is the plan's size on every rank.
      const uint64_t hostRegion = executor.hostRegionBytes();
      if (hostRegion > 0)
        std::printf("fsdp-run: rank %d host region (--offload): %.3f MiB of host memory besides\n", r,
                    hostRegion / 1048576.0);
      if (metrics)
        std::fprintf(metrics,
                     "{\"rank\": %d, \"measured_peak_tensor_bytes\": %" PRIu64 ", \"planned_tensor_bytes\": %" PRIu64
                     ", \"auxiliary_device_bytes\": %" PRIu64 ", \"host_region_bytes\": %" PRIu64 "}\n",
                     r, measured, executor.tensorBytes(), auxiliary, hostRegion);
    }
  }
  if (metrics && std::fclose(metrics) != 0)
    return fail(FSDPC_ERROR(kDataLoss, "cannot write --metrics-json file '", options.metricsPath, "'"));

  if (!options.savePath.empty() || !options.saveOnnxPath.empty()) {
    StatusOr<NamedArrays> full = executor.gatherFullParameters();
    if (!full.isOk())
      return fail(full.status());
    // Rank 0 writes; the others learn whether it could (a missing source
    // model must not leave them waiting).
    Status saved = Status::ok();
    if (reports && !options.savePath.empty()) {
      NamedArrays named = *full;
      if (options.torchNames)
        for (const plan::TorchName &pair : header.torch_names())
          for (auto &[name, array] : named)
            if (name == pair.parameter() && array.shape.size() == 2) {
              // MatMul's right operand is the Linear weight transposed.
              name = pair.torch_name();
              array = transposed2d(array);
            }
      saved = writeSafetensors(named, options.savePath, {{"producer", "fsdp-run"}});
      if (saved.isOk())
        std::printf("fsdp-run: saved the full parameters to %s\n", options.savePath.c_str());
    }
    if (reports && saved.isOk() && !options.saveOnnxPath.empty()) {
      // The plan records the model's file name (not its path, so that plans
      // are the same on every machine): next to the plan, else here.
      std::string source = options.onnxModel;
      if (source.empty()) {
        const size_t slash = options.planPath.find_last_of('/');
        const std::string besidePlan =
            (slash == std::string::npos ? std::string() : options.planPath.substr(0, slash + 1)) + header.source_model();
        FILE *probe = std::fopen(besidePlan.c_str(), "rb");
        source = probe ? besidePlan : header.source_model();
        if (probe)
          std::fclose(probe);
      }
      saved = writeTrainedOnnx(source, *full, header.initializer_rewrites(), options.saveOnnxPath);
      if (saved.isOk())
        std::printf("fsdp-run: saved %s with the trained parameters to %s\n", source.c_str(),
                    options.saveOnnxPath.c_str());
    }
    Status agreed = communicator->agreeOn(saved.isOk() ? 0 : 1, "saving the trained parameters");
    if (!saved.isOk())
      return fail(saved);
    if (!agreed.isOk())
      return fail(FSDPC_ERROR(kAborted, "rank 0 failed to save the trained parameters"));
  }
  if (!options.saveShardedDir.empty() && savedAfter != endStep) {
    Status saved = saveCheckpoint(endStep);
    if (!saved.isOk())
      return fail(saved);
  }
  communicator->finish();
  return 0;
}
