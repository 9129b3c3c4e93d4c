#!/usr/bin/python3
"""Activation checkpointing and prefetch on the CPU, measured in one run
(printed, not asserted): the example GPT where activations dominate
(dim 256, 8 blocks, context 256, global batch 8) on 2 ranks, full_shard, one
unit per block. For --recompute none, every block (units:), auto at 75% and
at 50% of none's predicted peak, and none without prefetch: the predicted
and measured peak, the median step time after warm-up and the median
exposed communication (the compute stream's wait on communication), with
ratios to none.

  PATH=build/bin:$PATH /usr/bin/python3 test/bench/recompute_cpu.py [--work DIR] [--steps N]
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
DIM, LAYERS, CONTEXT, HEADS, BATCH = 256, 8, 256, 8, 8


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), result.stdout[-3000:], result.stderr[-3000:]))
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="/tmp/fsdpc-recompute-bench")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "data")
    run([sys.executable, os.path.join(EXAMPLES, "gpt", "prepare_data.py"), "--out-dir", data, "--context",
         str(CONTEXT), "--stride", "7"])
    model = os.path.join(args.work, "gpt.onnx")
    run([sys.executable, os.path.join(EXAMPLES, "gpt", "export.py"), "--out", model, "--data-dir", data, "--batch",
         str(BATCH), "--context", str(CONTEXT), "--dim", str(DIM), "--heads", str(HEADS), "--layers", str(LAYERS)])
    common = ["--batch-size", str(BATCH), "--world-size", "2", "--strategy", "full_shard", "--wrap",
              r"module:blocks\.[0-9]+", "--no-weights"]

    def compile_plan(name, flags):
        plan, report = os.path.join(args.work, name + ".bin"), os.path.join(args.work, name + ".json")
        out = run(["fsdpc", model, "-o", plan, "--report-json", report] + common + flags)
        chosen = [line.split(": ", 2)[-1] for line in out.splitlines() if "--recompute auto" in line]
        return plan, json.load(open(report))["per_rank"]["predicted_peak_bytes"], chosen[0] if chosen else ""

    none_plan, none_peak, _ = compile_plan("none", [])
    configs = [("none", none_plan, none_peak, "")]
    configs.append(("units (every block)",) + compile_plan("units", ["--recompute", r"units:blocks\.[0-9]+"]))
    for share in (75, 50):
        budget = none_peak * share // 100
        configs.append(("auto at %d%%" % share,) + compile_plan("auto%d" % share, ["--recompute", "auto",
                                                                                    "--memory-budget", str(budget)]))
    configs.append(("none, no prefetch",) + compile_plan("noprefetch", ["--prefetch=false"]))

    rows = []
    for name, plan, predicted, chosen in configs:
        metrics = os.path.join(args.work, name.split()[0] + str(len(rows)) + ".jsonl")
        run(MPIRUN + ["fsdp-run", plan, "--steps", str(args.steps), "--data", data, "--init", "normal:0.02,1",
                      "--metrics-json", metrics])
        records = [json.loads(line) for line in open(metrics)]
        steps = [r for r in records if "loss" in r][1:]  # the first step warms up
        measured = max(r["measured_peak_tensor_bytes"] for r in records if "measured_peak_tensor_bytes" in r)
        rows.append((name, predicted, measured, statistics.median(r["step_ms"] for r in steps),
                     statistics.median(r["exposed_comm_ms"] for r in steps), chosen))
    print("GPT dim %d, %d blocks, context %d, global batch %d, 2 ranks, full_shard, AdamW fp32 (CPU)" % (
        DIM, LAYERS, CONTEXT, BATCH))
    print("%-20s %12s %12s %8s %10s %8s %12s" % ("", "predicted", "measured", "of none", "step ms", "vs none",
                                                "exposed ms"))
    base_ms = rows[0][3]
    for name, predicted, measured, ms, exposed, chosen in rows:
        print("%-20s %8.1f MiB %8.1f MiB %7.0f%% %10.1f %7.2fx %12.1f" % (
            name, predicted / 2**20, measured / 2**20, 100 * predicted / none_peak, ms, ms / base_ms, exposed))
    for name, _, _, _, _, chosen in rows:
        if chosen:
            print("%s chose %s" % (name, chosen))


if __name__ == "__main__":
    main()
