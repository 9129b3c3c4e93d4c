#!/usr/bin/python3
"""fsdp-run --eval-data against torch: trains an ONNX model on N ranks for 10
steps with --eval-every 5 --eval-batches M on a held-out data set, and
checks that

- each eval_loss equals torch's mean cross entropy over the same M eval
  batches, computed from the parameters fsdp-run saved after that step,
  within --rtol;
- evaluation changes nothing: the training losses are bit-identical to a
  run without it.

Needs /usr/bin/python3 (torch, onnx, numpy), and fsdpc, fsdp-run and mpirun
on PATH.
"""
import argparse
import json
import os
import sys

import onnx
import torch
import torch.nn.functional as F

from torch_reference import HEADROOM, Dataset, OnnxInTorch, read_safetensors, read_steps, run

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]


def torch_eval_loss(model, params, data, batches):
    net = OnnxInTorch(model)
    for name, value in params.items():
        net.params[name] = torch.tensor(value)
    total = 0.0
    with torch.no_grad():
        for b in range(batches):
            index = [(b * data.batch + j) % data.samples for j in range(data.batch)]
            (logits,) = net({data.input_name: torch.tensor(data.inputs[index])})
            target = torch.tensor(data.labels[index])
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1)).item()
    return total / batches


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", help="an ONNX file (cross-entropy classifier)")
    parser.add_argument("--work", required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--wrap", default="none")
    parser.add_argument("--eval-batches", type=int, default=3)
    parser.add_argument("--extra", default="", help="more fsdpc flags, space-separated")
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(2)
    model = onnx.load(args.model)
    train = Dataset(model, os.path.join(args.work, "train"), 480, "cross_entropy", seed=1234)
    held_out = Dataset(model, os.path.join(args.work, "eval"), 96, "cross_entropy", seed=99)

    plan = os.path.join(args.work, "plan.bin")
    run(["fsdpc", args.model, "-o", plan, "--world-size", str(args.ranks), "--wrap", args.wrap] + args.extra.split())
    launch = MPIRUN + ["-np", str(args.ranks)] if args.ranks > 1 else []

    def train_run(name, steps, evaluate):
        metrics = os.path.join(args.work, name + ".jsonl")
        cmd = launch + ["fsdp-run", plan, "--steps", str(steps), "--data", train.dir, "--metrics-json", metrics,
                        "--save", os.path.join(args.work, name + ".safetensors")]
        if evaluate:
            cmd += ["--eval-data", held_out.dir, "--eval-every", "5", "--eval-batches", str(args.eval_batches)]
        out = run(cmd)
        return metrics, out

    metrics, out = train_run("with-eval", 10, True)
    print("\n".join(line for line in out.splitlines() if line.startswith("eval")))
    train_run("step5", 5, False)
    plain, _ = train_run("plain", 10, False)

    evals = {r["step"] + 1: r["eval_loss"] for r in map(json.loads, open(metrics)) if "eval_loss" in r}
    failures = 0
    if sorted(evals) != [5, 10]:
        print("expected evaluations after steps 5 and 10, got %s" % sorted(evals))
        failures += 1
    for step, name in ((5, "step5"), (10, "with-eval")):
        want = torch_eval_loss(model, read_safetensors(os.path.join(args.work, name + ".safetensors")), held_out,
                               args.eval_batches)
        got = evals.get(step, float("nan"))
        rel = abs(got - want) / max(abs(want), 1e-12)
        bad = not rel <= args.rtol
        failures += bad
        HEADROOM.add("eval_loss vs torch", rel, args.rtol)
        print("eval after step %d: fsdp-run %.9g torch %.9g relative %.2e%s" % (step, got, want, rel,
                                                                               "  <-- FAIL" if bad else ""))
    a, b = read_steps(metrics), read_steps(plain)
    same = a == b
    print("training losses with and without evaluation: %s" % ("bit-identical" if same else "DIFFER"))
    failures += not same
    HEADROOM.print()
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
