#!/usr/bin/python3
"""The example models on the GPU against the CPU backend, and 2 ranks on one
GPU against 1 rank: every step's loss must agree.

Plans are compiled where the compiler is (MLIR is not on the GPU machines)
and run where the GPU is, so the script has two halves:

  devices_agree.py prepare --fsdpc BIN --out DIR
      exports the example MLP, GPT and LLaMA with torch (/usr/bin/python3,
      torch 1.13 is enough), takes the committed Hugging Face GPT-2
      classifier export, compiles the plans of every check into DIR and
      writes DIR/checks.json.
  devices_agree.py run --fsdp-run BIN --plans DIR [--work DIR]
      runs every check on this machine's GPU and prints one line per check
      and a RESULT line; exits 77 (skipped) when no GPU is visible.
  devices_agree.py all --build BUILD --work DIR
      both, for ctest; skips before compiling anything when no GPU is there.
  devices_agree.py all --build BUILD --work DIR --emulated [--steps N]
      the same checks with fsdp-run-emulated, whose CUDA device is the CUDA
      backend's own code on the CUDA emulator (docs/cuda-emulator.md): no
      GPU needed, so CI runs the whole CUDA path, host-staged 2 ranks too.

A check compares the per-step losses of two runs of one plan (or of two
plans of one model): |a - b| <= tolerance * max(1, |b|) at every step.
One more runs a small MLP on a batch holding a NaN with --check-nonfinite
on both devices: each must stop with exit 1 and name the same instruction.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
TORCH2 = os.path.join(ROOT, "test", "e2e", "Inputs", "torch2")
OPTIMUM = os.path.join(ROOT, "test", "e2e", "Inputs", "optimum")
OPTIMUM_FLAGS = ["--dim", "sequence_length=16", "--batch-size", "8", "--optimizer", "adamw", "--lr", "3e-3",
                 "--weight-decay", "0.01", "--strategy", "full_shard"]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]
STEPS = 20

# name: (export command, fsdpc flags, runs, data); each run is
# (device, ranks, plan world size).
GPT_FLAGS = ["--batch-size", "12", "--optimizer", "adamw", "--lr", "3e-3", "--strategy", "full_shard",
             "--wrap", r"module:blocks\.[0-9]+"]
MODELS = {
    # The example MLP: 4.2M parameters, drawn at run time (--no-weights).
    "mlp": {"export": [os.path.join(EXAMPLES, "mlp", "export.py"), "--out-dir", "{work}"], "onnx": "mlp.onnx",
            "flags": ["--lr", "1e-4", "--strategy", "full_shard", "--wrap", "module:fc[0-9]", "--no-weights"],
            "init": "normal:0.02,1", "data": None},
    "gpt": {"export": [os.path.join(EXAMPLES, "gpt", "export.py"), "--out", "{work}/gpt.onnx", "--data-dir", "{data}",
                       "--batch", "12"], "onnx": "gpt.onnx", "flags": GPT_FLAGS, "init": None, "data": "gpt-data"},
    # Heads of 32, a size the tensor-core attention takes (the example's 12
    # is not): its bf16 plan runs those kernels, forward and backward.
    "gpt-h32": {"export": [os.path.join(EXAMPLES, "gpt", "export.py"), "--out", "{work}/gpt-h32.onnx", "--data-dir",
                           "{data}", "--batch", "12", "--dim", "64", "--heads", "2"], "onnx": "gpt-h32.onnx",
                "flags": GPT_FLAGS, "init": None, "data": "gpt-data"},
    "llama": {"export": [os.path.join(EXAMPLES, "llama", "export.py"), "--out", "{work}/llama.onnx", "--data-dir",
                         "{data}", "--batch", "12"], "onnx": "llama.onnx", "flags": GPT_FLAGS, "init": None,
              "data": "gpt-data"},
    # Hugging Face GPT2ForSequenceClassification (a committed torch 2.x
    # export, test/e2e/Inputs/torch2): its head computes each sample's last
    # token that is not padding with i64 arithmetic and arg_max on the device.
    "gpt2-classifier": {"fixture": os.path.join(TORCH2, "hf-gpt2-classifier-torchscript-opset17.onnx"),
                        "fixture_data": os.path.join(TORCH2, "data-classes-padded"),
                        "onnx": "gpt2-classifier.onnx", "init": None, "data": "classifier-data",
                        "flags": ["--batch-size", "8", "--optimizer", "adamw", "--lr", "3e-3", "--strategy",
                                  "full_shard"]},
    # Hugging Face Optimum's GPT-2 and LLaMA exports on left-padded batches
    # (committed, test/e2e/Inputs/optimum): attention fused with the mask
    # computed from attention_mask on the device, and padding queries that
    # see no key (output 0 on both devices).
    "optimum-gpt2": {"fixture": os.path.join(OPTIMUM, "hf-gpt2-left-padded-optimum.onnx"),
                     "fixture_data": os.path.join(OPTIMUM, "data-gpt2-left-padded"), "onnx": "optimum-gpt2.onnx",
                     "init": None, "data": "optimum-gpt2-data", "flags": OPTIMUM_FLAGS},
    "optimum-llama": {"fixture": os.path.join(OPTIMUM, "hf-llama-left-padded-optimum.onnx"),
                      "fixture_data": os.path.join(OPTIMUM, "data-llama-left-padded"), "onnx": "optimum-llama.onnx",
                      "init": None, "data": "optimum-llama-data", "flags": OPTIMUM_FLAGS},
    # Hugging Face Gemma 2 (attention with soft-capped scores, a sliding
    # window) and GLM-4 (the interleaved rotation), dynamo exports.
    "gemma2": {"fixture": os.path.join(TORCH2, "hf-gemma2-dynamo-opset18-unoptimized.onnx"),
               "fixture_data": os.path.join(TORCH2, "data"), "onnx": "gemma2.onnx", "init": None,
               "data": "gemma2-data", "flags": ["--batch-size", "8", "--optimizer", "adamw", "--lr", "3e-3",
                                                "--strategy", "full_shard"]},
    "glm4": {"fixture": os.path.join(TORCH2, "hf-glm4-dynamo-opset18-unoptimized.onnx"),
             "fixture_data": os.path.join(TORCH2, "data"), "onnx": "glm4.onnx", "init": None,
             "data": "glm4-data", "flags": ["--batch-size", "8", "--optimizer", "adamw", "--lr", "3e-3",
                                            "--strategy", "full_shard"]},
    # GPT-OSS: attention with sinks, the rotation in halves, experts.
    "gpt-oss": {"fixture": os.path.join(TORCH2, "hf-gpt-oss-dynamo-opset18-unoptimized.onnx"),
                "fixture_data": os.path.join(TORCH2, "data"), "onnx": "gpt-oss.onnx", "init": None,
                "data": "gpt-oss-data", "flags": ["--batch-size", "8", "--optimizer", "adamw", "--lr", "3e-3",
                                                  "--strategy", "full_shard"]},
}

# (check, plan, device, ranks, reference check or None, tolerance)
PLANS = {
    "mlp-w1": ("mlp", 1, []),
    "gpt-w1": ("gpt", 1, []),
    "gpt-w2": ("gpt", 2, []),
    "llama-w1": ("llama", 1, []),
    "gpt-bf16-w1": ("gpt", 1, ["--mixed-precision", "bf16"]),
    "gpt-h32-bf16-w1": ("gpt-h32", 1, ["--mixed-precision", "bf16"]),
    # fsdpc --offload (FSDP's CPUOffload): the state in pinned host memory,
    # the optimizer step on the host.
    "gpt-offload-opt-w1": ("gpt", 1, ["--offload", "optimizer"]),
    "gpt-offload-params-w1": ("gpt", 1, ["--offload", "params"]),
    "gpt-offload-params-w2": ("gpt", 2, ["--offload", "params"]),
    "gpt-bf16-offload-params-w1": ("gpt", 1, ["--mixed-precision", "bf16", "--offload", "params"]),
    "classifier-w1": ("gpt2-classifier", 1, []),
    "classifier-w2": ("gpt2-classifier", 2, []),
    "optimum-gpt2-w1": ("optimum-gpt2", 1, []),
    "optimum-gpt2-bf16-w1": ("optimum-gpt2", 1, ["--mixed-precision", "bf16"]),
    "optimum-llama-w1": ("optimum-llama", 1, []),
    "optimum-llama-bf16-w1": ("optimum-llama", 1, ["--mixed-precision", "bf16"]),
    "gemma2-w1": ("gemma2", 1, []),
    "gemma2-bf16-w1": ("gemma2", 1, ["--mixed-precision", "bf16"]),
    "glm4-w1": ("glm4", 1, []),
    "glm4-bf16-w1": ("glm4", 1, ["--mixed-precision", "bf16"]),
    "gpt-oss-w1": ("gpt-oss", 1, []),
    "gpt-oss-bf16-w1": ("gpt-oss", 1, ["--mixed-precision", "bf16"]),
}
RUNS = [
    # name, plan, device, ranks
    ("mlp-cpu", "mlp-w1", "cpu", 1),
    ("mlp-cuda", "mlp-w1", "cuda", 1),
    ("gpt-cpu", "gpt-w1", "cpu", 1),
    ("gpt-cuda", "gpt-w1", "cuda", 1),
    ("gpt-cuda-2-ranks", "gpt-w2", "cuda", 2),
    ("llama-cpu", "llama-w1", "cpu", 1),
    ("llama-cuda", "llama-w1", "cuda", 1),
    ("gpt-bf16-cpu", "gpt-bf16-w1", "cpu", 1),
    ("gpt-bf16-cuda", "gpt-bf16-w1", "cuda", 1),
    ("gpt-h32-bf16-cpu", "gpt-h32-bf16-w1", "cpu", 1),
    ("gpt-h32-bf16-cuda", "gpt-h32-bf16-w1", "cuda", 1),
    # The CUDA runs capture the step once as a CUDA graph and replay it (the
    # default); these launch every kernel each step: the same kernels in the
    # same order, so the same bits.
    ("gpt-cuda-no-graph", "gpt-w1", "cuda", 1, ["--no-cuda-graph"]),
    ("gpt-h32-bf16-cuda-no-graph", "gpt-h32-bf16-w1", "cuda", 1, ["--no-cuda-graph"]),
    ("gpt-offload-optimizer-cuda", "gpt-offload-opt-w1", "cuda", 1),
    ("gpt-offload-params-cuda", "gpt-offload-params-w1", "cuda", 1),
    ("gpt-offload-params-cuda-no-graph", "gpt-offload-params-w1", "cuda", 1, ["--no-cuda-graph"]),
    ("gpt-offload-params-cuda-2-ranks", "gpt-offload-params-w2", "cuda", 2),
    ("gpt-bf16-offload-params-cuda", "gpt-bf16-offload-params-w1", "cuda", 1),
    ("classifier-cpu", "classifier-w1", "cpu", 1),
    ("classifier-cuda", "classifier-w1", "cuda", 1),
    ("classifier-cuda-2-ranks", "classifier-w2", "cuda", 2),
    ("optimum-gpt2-cpu", "optimum-gpt2-w1", "cpu", 1),
    ("optimum-gpt2-cuda", "optimum-gpt2-w1", "cuda", 1),
    ("optimum-gpt2-bf16-cpu", "optimum-gpt2-bf16-w1", "cpu", 1),
    ("optimum-gpt2-bf16-cuda", "optimum-gpt2-bf16-w1", "cuda", 1),
    ("optimum-llama-cpu", "optimum-llama-w1", "cpu", 1),
    ("optimum-llama-cuda", "optimum-llama-w1", "cuda", 1),
    ("optimum-llama-bf16-cpu", "optimum-llama-bf16-w1", "cpu", 1),
    ("optimum-llama-bf16-cuda", "optimum-llama-bf16-w1", "cuda", 1),
    ("gemma2-cpu", "gemma2-w1", "cpu", 1),
    ("gemma2-cuda", "gemma2-w1", "cuda", 1),
    ("gemma2-bf16-cpu", "gemma2-bf16-w1", "cpu", 1),
    ("gemma2-bf16-cuda", "gemma2-bf16-w1", "cuda", 1),
    ("glm4-cpu", "glm4-w1", "cpu", 1),
    ("glm4-cuda", "glm4-w1", "cuda", 1),
    ("glm4-bf16-cpu", "glm4-bf16-w1", "cpu", 1),
    ("glm4-bf16-cuda", "glm4-bf16-w1", "cuda", 1),
    ("gpt-oss-cpu", "gpt-oss-w1", "cpu", 1),
    ("gpt-oss-cuda", "gpt-oss-w1", "cuda", 1),
    ("gpt-oss-bf16-cpu", "gpt-oss-bf16-w1", "cpu", 1),
    ("gpt-oss-bf16-cuda", "gpt-oss-bf16-w1", "cuda", 1),
]
CHECKS = [
    # what, run, reference run, tolerance
    ("MLP fp32, GPU vs CPU", "mlp-cuda", "mlp-cpu", 1e-4),
    ("GPT fp32, GPU vs CPU", "gpt-cuda", "gpt-cpu", 1e-4),
    ("LLaMA fp32, GPU vs CPU", "llama-cuda", "llama-cpu", 1e-4),
    ("GPT fp32, 2 ranks on one GPU vs 1 rank", "gpt-cuda-2-ranks", "gpt-cuda", 1e-5),
    # bf16 rounds where each backend rounds (the CPU widens to f32 per
    # kernel, cuBLASLt accumulates a whole GEMM in f32): bf16's own spread.
    ("GPT bf16, GPU vs CPU", "gpt-bf16-cuda", "gpt-bf16-cpu", 2e-2),
    ("GPT bf16, heads of 32 (tensor-core attention), GPU vs CPU", "gpt-h32-bf16-cuda", "gpt-h32-bf16-cpu", 2e-2),
    # A captured step runs the same kernels in the same order. The one
    # difference run to run is the embedding's gradient, whose atomics add
    # repeated tokens in any order: on the H200 two runs of the same plan
    # once came 8e-8 apart at step 13 (they were equal in the run before).
    ("GPT fp32, captured (default) vs --no-cuda-graph", "gpt-cuda", "gpt-cuda-no-graph", 1e-6),
    ("GPT bf16 heads of 32, captured vs --no-cuda-graph", "gpt-h32-bf16-cuda", "gpt-h32-bf16-cuda-no-graph", 1e-5),
    # Offloaded, the same kernels run but the optimizer's, which is the CPU
    # backend's AdamW on the host instead of the CUDA one.
    ("GPT fp32 --offload optimizer vs without", "gpt-offload-optimizer-cuda", "gpt-cuda", 1e-6),
    ("GPT fp32 --offload params vs without", "gpt-offload-params-cuda", "gpt-cuda", 1e-6),
    ("GPT fp32 --offload params, captured vs --no-cuda-graph", "gpt-offload-params-cuda",
     "gpt-offload-params-cuda-no-graph", 1e-6),
    ("GPT fp32 --offload params, 2 ranks on one GPU vs without", "gpt-offload-params-cuda-2-ranks",
     "gpt-cuda-2-ranks", 1e-6),
    # An AdamW ulp apart rounds a bf16 weight the other way now and then.
    ("GPT bf16 --offload params vs without", "gpt-bf16-offload-params-cuda", "gpt-bf16-cuda", 1e-5),
    ("GPT-2 classifier (i64 head) fp32, GPU vs CPU", "classifier-cuda", "classifier-cpu", 1e-4),
    ("GPT-2 classifier fp32, 2 ranks on one GPU vs 1 rank", "classifier-cuda-2-ranks", "classifier-cuda", 1e-5),
    ("Optimum GPT-2 left-padded fp32, GPU vs CPU", "optimum-gpt2-cuda", "optimum-gpt2-cpu", 1e-4),
    ("Optimum GPT-2 left-padded bf16, GPU vs CPU", "optimum-gpt2-bf16-cuda", "optimum-gpt2-bf16-cpu", 2e-2),
    ("Optimum LLaMA left-padded fp32, GPU vs CPU", "optimum-llama-cuda", "optimum-llama-cpu", 1e-4),
    ("Optimum LLaMA left-padded bf16, GPU vs CPU", "optimum-llama-bf16-cuda", "optimum-llama-bf16-cpu", 2e-2),
    ("Gemma 2 (soft-capped attention) fp32, GPU vs CPU", "gemma2-cuda", "gemma2-cpu", 1e-4),
    ("Gemma 2 bf16, GPU vs CPU", "gemma2-bf16-cuda", "gemma2-bf16-cpu", 2e-2),
    ("GLM-4 (interleaved rotation) fp32, GPU vs CPU", "glm4-cuda", "glm4-cpu", 1e-4),
    ("GLM-4 bf16, GPU vs CPU", "glm4-bf16-cuda", "glm4-bf16-cpu", 2e-2),
    ("GPT-OSS (attention sinks) fp32, GPU vs CPU", "gpt-oss-cuda", "gpt-oss-cpu", 1e-4),
    ("GPT-OSS bf16, GPU vs CPU", "gpt-oss-bf16-cuda", "gpt-oss-bf16-cpu", 2e-2),
]
# (offloaded run, the same plan's run without --offload): device memory
# lower by what the compiler moved to the host.
OFFLOAD_MEMORY = [
    ("gpt-offload-optimizer-cuda", "gpt-cuda"),
    ("gpt-offload-params-cuda", "gpt-cuda"),
    ("gpt-offload-params-cuda-2-ranks", "gpt-cuda-2-ranks"),
    ("gpt-bf16-offload-params-cuda", "gpt-bf16-cuda"),
]


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), result.stdout[-4000:], result.stderr[-4000:]))
    return result.stdout


def gpu_count():
    nvidia_smi = shutil.which("nvidia-smi")
    if not nvidia_smi:
        return 0
    result = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True)
    return result.stdout.count("GPU ") if result.returncode == 0 else 0


def gpu_visible():
    return gpu_count() > 0


def prepare(fsdpc, out):
    os.makedirs(out, exist_ok=True)
    data = os.path.join(out, "gpt-data")
    run([sys.executable, os.path.join(EXAMPLES, "gpt", "prepare_data.py"), "--out-dir", data])
    for name, model in MODELS.items():
        if "fixture" in model:  # a committed export and its data
            shutil.copy(model["fixture"], os.path.join(out, model["onnx"]))
            shutil.copytree(model["fixture_data"], os.path.join(out, model["data"]), dirs_exist_ok=True)
            continue
        cmd = [sys.executable] + [a.format(work=out, data=data) for a in model["export"]]
        run(cmd)
    for plan, (model, world, extra) in PLANS.items():
        spec = MODELS[model]
        run([fsdpc, os.path.join(out, spec["onnx"]), "-o", os.path.join(out, plan + ".bin"), "--world-size",
             str(world)] + spec["flags"] + extra)
    manifest = {"plans": {p: {"model": m, "world": w} for p, (m, w, _) in PLANS.items()},
                "models": {m: {"init": s["init"], "data": s["data"]} for m, s in MODELS.items()}}
    with open(os.path.join(out, "checks.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    # --check-nonfinite: a NaN in the second batch of a small MLP.
    nonfinite = os.path.join(out, "nonfinite")
    os.makedirs(nonfinite, exist_ok=True)
    run([sys.executable, os.path.join(EXAMPLES, "mlp", "export.py"), "--out-dir", nonfinite, "--sizes", "3,4,4,2",
         "--batch", "4"])
    run([fsdpc, os.path.join(nonfinite, "mlp.onnx"), "-o", os.path.join(out, "nonfinite.bin")])
    run([sys.executable, "-c", "import numpy as np, sys; x = np.ones((8, 3), np.float32); x[5, 1] = np.nan; "
         "np.save(sys.argv[1] + '/input.npy', x); np.save(sys.argv[1] + '/labels.npy', np.zeros(8, np.int64))",
         nonfinite])
    for name in os.listdir(nonfinite):
        if name.endswith(".onnx"):
            os.remove(os.path.join(nonfinite, name))
    for name in os.listdir(out):  # the plans hold what the runs need
        if name.endswith(".onnx"):
            os.remove(os.path.join(out, name))
    print("prepared %d plans in %s" % (len(PLANS), out))


def read_losses(path):
    steps = {}
    for line in open(path):
        record = json.loads(line)
        if "loss" in record:
            steps[record["step"]] = record["loss"]
    return [steps[s] for s in sorted(steps)]


def first_nonfinite(fsdp_run, plans, device):
    """What --check-nonfinite names on `device`, or why it did not."""
    cmd = [fsdp_run, os.path.join(plans, "nonfinite.bin"), "--device", device, "--data",
           os.path.join(plans, "nonfinite"), "--steps", "3", "--check-nonfinite"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    found = re.search(r"the first non-finite value on rank 0 came from (instruction [0-9]+ '[a-z_]+'[^;\n]*)",
                      result.stderr)
    if result.returncode != 1 or not found:
        return None, "exit %d: %s" % (result.returncode, result.stderr.strip()[-300:])
    return found.group(1), ""


def run_checks(fsdp_run, plans, work, emulated=False, steps=STEPS):
    if not emulated and not gpu_visible():
        print("SKIP: no GPU is visible (nvidia-smi -L lists none)")
        return 77
    manifest = json.load(open(os.path.join(plans, "checks.json")))
    os.makedirs(work, exist_ok=True)
    losses, peaks = {}, {}
    runs, checks = list(RUNS), list(CHECKS)
    if not emulated and gpu_count() >= 2:  # one rank per GPU: NCCL, not the host-staged fallback
        runs.append(("gpt-nccl-2-gpus", "gpt-w2", "cuda", 2))
        checks.append(("GPT fp32, 2 ranks on 2 GPUs (NCCL) vs 1 rank", "gpt-nccl-2-gpus", "gpt-cuda", 1e-5))
    for name, plan, device, ranks, *extra in runs:
        info = manifest["plans"][plan]
        model = manifest["models"][info["model"]]
        metrics = os.path.join(work, name + ".jsonl")
        cmd = [fsdp_run, os.path.join(plans, plan + ".bin"), "--device", device, "--steps", str(steps),
               "--metrics-json", metrics]
        if model["init"]:
            cmd += ["--init", model["init"]]
        if model["data"]:
            cmd += ["--data", os.path.join(plans, model["data"])]
        cmd += extra[0] if extra else []
        if ranks > 1:
            # Both ranks on GPU 0 (LOCAL_RANK picks the GPU), unless the run
            # is the one-rank-per-GPU NCCL run.
            local = [] if name.endswith("gpus") else ["-x", "LOCAL_RANK=0"]
            cmd = MPIRUN + local + ["-np", str(ranks)] + cmd
        out = run(cmd)
        first = out.splitlines()[0] if out else ""
        losses[name] = read_losses(metrics)
        if device == "cuda":
            peaks[name] = [json.loads(line) for line in open(metrics) if "planned_tensor_bytes" in line]
        print("ran %-18s %s; step 0 loss %.6f, step %d loss %.6f" % (name, first, losses[name][0], steps - 1,
                                                                    losses[name][-1]))
    failures = 0
    print("%-58s %12s %10s  %s" % ("check", "worst", "tolerance", "at step"))
    for what, got_name, want_name, tolerance in checks:
        got, want = losses[got_name], losses[want_name]
        excess = [abs(a - b) / max(1.0, abs(b)) for a, b in zip(got, want)]
        worst = max(range(len(excess)), key=excess.__getitem__)
        ok = len(got) == len(want) == steps and all(e <= tolerance for e in excess)
        failures += not ok
        print("%-58s %12.3e %10.0e  %d%s" % (what, excess[worst], tolerance, worst, "" if ok else "  <-- FAIL"))
    # The plan's memory report on the GPU: the regions the device holds are
    # the ones the compiler planned (within 2%), kernel scratch and cuBLASLt
    # workspaces apart.
    for name, records in sorted(peaks.items()):
        for record in records:
            measured, planned = record["measured_peak_tensor_bytes"], record["planned_tensor_bytes"]
            off = abs(measured - planned) / max(planned, 1)
            ok = len(records) >= 1 and off <= 0.02
            failures += not ok
            print("%s rank %d: measured %.3f MiB, planned %.3f MiB (%.2f%%), besides %.3f MiB of scratch and "
                  "workspace%s" % (name, record["rank"], measured / 2**20, planned / 2**20, 100 * off,
                                   record.get("auxiliary_device_bytes", 0) / 2**20, "" if ok else "  <-- FAIL"))
    # Offload: the device holds less by what the plans say it moved (the
    # planned regions' difference, which the compiler's report gives),
    # measured on the device; the host region is apart.
    for offloaded, base in OFFLOAD_MEMORY:
        for got, want in zip(peaks[offloaded], peaks[base]):
            lower = want["measured_peak_tensor_bytes"] - got["measured_peak_tensor_bytes"]
            planned = want["planned_tensor_bytes"] - got["planned_tensor_bytes"]
            ok = planned > 0 and abs(lower - planned) <= 0.02 * planned
            failures += not ok
            print("%s rank %d: device tensor memory %.3f MiB lower than %s (planned %.3f MiB lower), %.3f MiB in "
                  "host memory%s" % (offloaded, got["rank"], lower / 2**20, base, planned / 2**20,
                                     got.get("host_region_bytes", 0) / 2**20, "" if ok else "  <-- FAIL"))
    cpu, why_cpu = first_nonfinite(fsdp_run, plans, "cpu")
    gpu, why_gpu = first_nonfinite(fsdp_run, plans, "cuda")
    ok = cpu is not None and cpu == gpu
    failures += not ok
    print("--check-nonfinite: cpu names %s; cuda names %s%s" % (cpu or why_cpu, gpu or why_gpu,
                                                                 "" if ok else "  <-- FAIL"))
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d checks)" % failures)
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--fsdpc", required=True)
    p.add_argument("--out", required=True)
    r = sub.add_parser("run")
    r.add_argument("--fsdp-run", required=True)
    r.add_argument("--plans", required=True)
    r.add_argument("--work", default="/tmp/fsdpc-devices-agree")
    r.add_argument("--emulated", action="store_true", help="BIN is fsdp-run-emulated: no GPU needed")
    r.add_argument("--steps", type=int, default=STEPS)
    a = sub.add_parser("all")
    a.add_argument("--build", required=True)
    a.add_argument("--work", required=True)
    a.add_argument("--emulated", action="store_true", help="run the CUDA device on the CUDA emulator")
    a.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.fsdpc, args.out)
        return 0
    if args.command == "run":
        return run_checks(args.fsdp_run, args.plans, args.work, emulated=args.emulated, steps=args.steps)
    if not args.emulated and not gpu_visible():
        print("SKIP: no GPU is visible (nvidia-smi -L lists none)")
        return 77
    plans = os.path.join(args.work, "plans")
    prepare(os.path.join(args.build, "bin", "fsdpc"), plans)
    runner = "fsdp-run-emulated" if args.emulated else "fsdp-run"
    return run_checks(os.path.join(args.build, "bin", runner), plans, os.path.join(args.work, "runs"),
                      emulated=args.emulated, steps=args.steps)


if __name__ == "__main__":
    sys.exit(main())
