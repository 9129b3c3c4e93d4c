#!/usr/bin/python3
"""Collective buckets on the CPU, measured in one run (printed, not
asserted): the example GPT with many small units (dim 64, 8 blocks, one unit
per linear layer and norm, about 50 units of 4K to 16K parameters) on 2
ranks, full_shard. For --bucket-bytes 0 (one collective per unit), 64K, 256K
and 4M: collectives per step, predicted peak, median step time after
warm-up and median exposed communication, with ratios to no buckets.

  PATH=build/bin:$PATH /usr/bin/python3 test/bench/bucket_cpu.py [--work DIR] [--steps N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1", "-np", "2"]
DIM, LAYERS, CONTEXT, HEADS, BATCH = 64, 8, 32, 4, 8


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), result.stdout[-3000:], result.stderr[-3000:]))
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="/tmp/fsdpc-bucket-bench")
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "data")
    run([sys.executable, os.path.join(EXAMPLES, "gpt", "prepare_data.py"), "--out-dir", data, "--context",
         str(CONTEXT)])
    model = os.path.join(args.work, "gpt.onnx")
    run([sys.executable, os.path.join(EXAMPLES, "gpt", "export.py"), "--out", model, "--data-dir", data, "--batch",
         str(BATCH), "--context", str(CONTEXT), "--dim", str(DIM), "--heads", str(HEADS), "--layers", str(LAYERS)])
    common = ["--batch-size", str(BATCH), "--world-size", "2", "--strategy", "full_shard", "--wrap",
              r"module:blocks\.[0-9]+\.[a-z_0-9]+(\.[a-z_0-9]+)?"]

    rows = []
    for bucket in ("0", "64K", "256K", "4M"):
        plan, report = os.path.join(args.work, bucket + ".bin"), os.path.join(args.work, bucket + ".json")
        run(["fsdpc", model, "-o", plan, "--report-json", report, "--bucket-bytes", bucket] + common)
        per_rank = json.load(open(report))
        calls = sum(c["count"] for c in per_rank["communication_per_step"].values())
        metrics = os.path.join(args.work, bucket + ".jsonl")
        run(MPIRUN + ["fsdp-run", plan, "--steps", str(args.steps), "--data", data, "--metrics-json", metrics])
        records = [json.loads(line) for line in open(metrics)]
        steps = [r for r in records if "loss" in r][2:]  # warm-up
        rows.append((bucket, calls, per_rank["per_rank"]["predicted_peak_bytes"],
                     statistics.median(r["step_ms"] for r in steps),
                     statistics.median(r["exposed_comm_ms"] for r in steps), [r["loss"] for r in records if "loss" in r]))
    print("GPT dim %d, %d blocks, context %d, global batch %d, 2 ranks, full_shard, one unit per layer (CPU)" % (
        DIM, LAYERS, CONTEXT, BATCH))
    print("%-14s %12s %12s %10s %8s %12s %8s" % ("--bucket-bytes", "collectives", "peak", "step ms", "vs 0",
                                                 "exposed ms", "vs 0"))
    base = rows[0]
    for bucket, calls, peak, ms, exposed, losses in rows:
        print("%-14s %12d %8.2f MiB %10.2f %7.2fx %12.2f %7.2fx%s" % (
            bucket, calls, peak / 2**20, ms, ms / base[3], exposed, exposed / base[4] if base[4] else 0,
            "" if losses == base[5] else "  (losses differ!)"))


if __name__ == "__main__":
    main()
