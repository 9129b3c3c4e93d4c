#!/usr/bin/python3
"""--offload must not change a number: trains the example GPT (2 layers) on
the CPU device with each sharding and loop feature (full_shard,
shard_grad_op, no_shard, hybrid_shard on 4 ranks, gradient accumulation,
SGD with momentum, gradient clipping, bucketed collectives, recompute,
bf16 with bf16 reductions), once without offload and once with
--offload params and --offload optimizer, and checks that every step's
loss is the same bits. On the CPU device the host region is host memory
too, but the plan is the offloaded one: host kernels run the optimizer and
every staged copy runs, so a copy placed after its reader, missing, or on
the wrong side changes the losses. With --emulated BIN (fsdp-run-emulated)
the same runs take the CUDA device on the CUDA emulator.

Needs /usr/bin/python3 (torch for the export), fsdpc, fsdp-run and mpirun on PATH.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1", "-x", "LOCAL_RANK=0"]
STEPS = 3
# name: (ranks, fsdpc flags)
CONFIGS = {
    "full_shard": (2, []),
    "shard_grad_op": (2, ["--strategy", "shard_grad_op"]),
    "no_shard": (2, ["--strategy", "no_shard"]),
    "hybrid_shard": (4, ["--strategy", "hybrid_shard", "--shard-group-size", "2"]),
    "grad-accum": (2, ["--grad-accum", "2"]),
    "sgd-momentum": (2, ["--optimizer", "sgd", "--momentum", "0.9"]),
    "clip-grad-norm": (2, ["--clip-grad-norm", "0.5"]),
    "bucket": (2, ["--bucket-bytes", "1M"]),
    "recompute": (2, ["--recompute", r"units:blocks\.0"]),
    "bf16-reduce-bf16": (2, ["--mixed-precision", "bf16", "--reduce-dtype", "bf16"]),
}


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), result.stdout[-3000:], result.stderr[-3000:]))
    return result.stdout


def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if "loss" in r]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", required=True)
    parser.add_argument("--emulated", help="fsdp-run-emulated: run on the emulated CUDA device")
    parser.add_argument("--only", help="comma-separated config names")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "data")
    run([sys.executable, os.path.join(EXAMPLES, "gpt", "prepare_data.py"), "--out-dir", data])
    onnx_path = os.path.join(args.work, "gpt.onnx")
    run([sys.executable, os.path.join(EXAMPLES, "gpt", "export.py"), "--out", onnx_path, "--data-dir", data,
         "--batch", "12", "--layers", "2"])
    fsdp_run, device = (args.emulated, "cuda") if args.emulated else ("fsdp-run", "cpu")
    failures = 0
    for name, (ranks, flags) in CONFIGS.items():
        if args.only and name not in args.only.split(","):
            continue
        got = {}
        for offload in ("none", "params", "optimizer"):
            plan = os.path.join(args.work, "%s-%s.bin" % (name, offload))
            metrics = os.path.join(args.work, "%s-%s.jsonl" % (name, offload))
            run(["fsdpc", onnx_path, "-o", plan, "--batch-size", "12", "--world-size", str(ranks), "--wrap",
                 r"module:blocks\.[0-9]+", "--lr", "3e-3", "--offload", offload] + flags)
            run(MPIRUN + ["-np", str(ranks), fsdp_run, plan, "--device", device, "--data", data, "--steps",
                          str(STEPS), "--metrics-json", metrics])
            got[offload] = losses(metrics)
        for offload in ("params", "optimizer"):
            same = len(got[offload]) == STEPS and got[offload] == got["none"]
            failures += not same
            print("%-17s --offload %-9s %d ranks: %s%s" % (
                name, offload, ranks, "losses identical" if same else "losses differ",
                "" if same else "  %s vs %s  <-- FAIL" % (got[offload], got["none"])))
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
