#!/usr/bin/python3
"""Activation checkpointing must not change a number: trains the example GPT
or LLaMA (4 layers, batch 48, so activations dominate memory) on N ranks
with --recompute none, units:blocks.N (every block replayed), cheap:blocks.N
(GEMM and attention outputs kept, the rest replayed) and auto at 60% of
none's predicted peak, in fp32 or with --mixed-precision bf16, and checks
that

- every step's loss is bit-identical to the run without recompute (CPU
  kernels are deterministic; a replay computes exactly what forward did);
- auto's predicted peak fits its budget, and recompute lowers the peak;
- each rank's measured peak (pages of the regions touched) is within 2% of
  the predicted one;
- a budget below the smallest reachable peak is refused at compile time,
  exit 1, with the smallest peak in the message.

Needs /usr/bin/python3 (torch for the export), fsdpc, fsdp-run and mpirun on PATH.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]
BATCH, LAYERS, STEPS = 48, 4, 8


def run(cmd, expect_ok=True):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and result.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), result.stdout[-3000:], result.stderr[-3000:]))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=["gpt", "llama"], default="gpt")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--mixed-precision", choices=["none", "bf16"], default="none")
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "data")
    run([sys.executable, os.path.join(EXAMPLES, "gpt", "prepare_data.py"), "--out-dir", data])
    onnx_path = os.path.join(args.work, "model.onnx")
    run([sys.executable, os.path.join(EXAMPLES, args.model, "export.py"), "--out", onnx_path, "--data-dir", data,
         "--batch", str(BATCH), "--layers", str(LAYERS)])
    common = ["--batch-size", str(BATCH), "--world-size", str(args.ranks), "--strategy", "full_shard",
              "--wrap", r"module:blocks\.[0-9]+", "--lr", "3e-3", "--mixed-precision", args.mixed_precision]

    def compile_plan(name, flags):
        plan, report = os.path.join(args.work, name + ".bin"), os.path.join(args.work, name + ".json")
        out = run(["fsdpc", onnx_path, "-o", plan, "--report-json", report] + common + flags).stdout
        return plan, json.load(open(report))["per_rank"]["predicted_peak_bytes"], out

    def train(name, plan):
        metrics = os.path.join(args.work, name + ".jsonl")
        launch = MPIRUN + ["-np", str(args.ranks)] if args.ranks > 1 else []
        run(launch + ["fsdp-run", plan, "--steps", str(STEPS), "--data", data, "--metrics-json", metrics])
        records = [json.loads(line) for line in open(metrics)]
        losses = [r["loss"] for r in sorted((r for r in records if "loss" in r), key=lambda r: r["step"])]
        measured = [r["measured_peak_tensor_bytes"] for r in records if "measured_peak_tensor_bytes" in r]
        return losses, measured

    failures = []
    none_plan, none_peak, _ = compile_plan("none", [])
    budget = int(0.6 * none_peak)
    runs = [("none", none_plan, none_peak)]
    plan, peak, _ = compile_plan("units", ["--recompute", r"units:blocks\.[0-9]+"])
    runs.append(("units", plan, peak))
    plan, peak, _ = compile_plan("cheap", ["--recompute", r"cheap:blocks\.[0-9]+"])
    runs.append(("cheap", plan, peak))
    plan, peak, out = compile_plan("auto", ["--recompute", "auto", "--memory-budget", str(budget)])
    chosen = [line for line in out.splitlines() if "--recompute auto" in line]
    print(chosen[0] if chosen else "auto chose nothing?")
    runs.append(("auto", plan, peak))
    if peak > budget:
        failures.append("auto's predicted peak %d exceeds its budget %d" % (peak, budget))

    print("%s on %d rank(s), %d layers, batch %d, mixed precision %s; budget for auto: 60%% of %.3f MiB = %.3f MiB" % (
        args.model, args.ranks, LAYERS, BATCH, args.mixed_precision, none_peak / 2**20, budget / 2**20))
    reference = None
    for name, plan, predicted in runs:
        losses, measured = train(name, plan)
        worst = max(abs(m - predicted) / predicted for m in measured)
        same = reference is None or losses == reference
        print("%-6s predicted %8.3f MiB (%5.1f%% of none)  measured within %.2f%%  losses %s" % (
            name, predicted / 2**20, 100 * predicted / none_peak, 100 * worst,
            "reference" if reference is None else ("identical" if same else "DIFFER")))
        if reference is None:
            reference = losses
        elif not same:
            failures.append("%s: losses %s differ from none's %s" % (name, losses, reference))
        if worst > 0.02:
            failures.append("%s: measured peak off the prediction by %.2f%%" % (name, 100 * worst))
        if name != "none" and predicted >= none_peak:
            failures.append("%s does not lower the peak" % name)

    # A budget nothing reaches: refused at compile time with the minimum.
    refused = run(["fsdpc", onnx_path, "-o", os.path.join(args.work, "tiny.bin"), "--recompute", "auto",
                   "--memory-budget", "64K"] + common, expect_ok=False)
    message = refused.stderr.strip().splitlines()[-1] if refused.stderr.strip() else ""
    print("budget 64K: exit %d: %s" % (refused.returncode, message))
    if refused.returncode != 1 or "the smallest peak with every unit recomputed is" not in message:
        failures.append("a 64K budget was not refused as expected")
    for f in failures:
        print("problem:", f)
    print("RESULT:", "FAIL" if failures else "PASS")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
