#!/usr/bin/python3
"""The training loop around the step against a torch loop on the same data:
learning-rate schedule (transformers' get_*_schedule_with_warmup through
LambdaLR), gradient clipping (torch.nn.utils.clip_grad_norm_) and gradient
accumulation (K micro-batches, each loss divided by K), on N ranks.

fsdpc compiles the model with the same flags, `mpirun -np N fsdp-run` trains
it, and every step's loss, learning rate and (with clipping) gradient norm
before clipping must be within --rtol (relative) of torch float32's. torch
runs in this process, without fsdpc (torch_reference.py).

Needs /usr/bin/python3 (torch, onnx, numpy), and fsdpc, fsdp-run and mpirun
on PATH.
"""
import argparse
import json
import os
import sys

import onnx
import torch

from torch_reference import HEADROOM, Dataset, export_example, run, schedule_lambda, train_torch

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", help="ONNX file, or mlp / mlp_relu to export the examples")
    parser.add_argument("--work", required=True)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--strategy", default="full_shard")
    parser.add_argument("--wrap", default="none")
    parser.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--samples", type=int, default=480)
    parser.add_argument("--lr-schedule", choices=["constant", "linear", "cosine"], default=None)
    parser.add_argument("--warmup-steps", type=int, default=0)
    parser.add_argument("--total-steps", type=int, default=0)
    parser.add_argument("--min-lr", type=float, default=0.0)
    parser.add_argument("--clip-grad-norm", type=float, default=0.0)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--accum-reduce", choices=["last", "each"], default=None)
    parser.add_argument("--shuffle-seed", type=int, default=None, help="fsdp-run --shuffle --seed S")
    parser.add_argument("--epochs", type=int, default=0, help="fsdp-run --epochs E instead of --steps")
    parser.add_argument("--extra", default="", help="more fsdpc flags, space-separated")
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(2)

    path = export_example(args.model, args.work) if args.model in ("mlp", "mlp_relu") else args.model
    model = onnx.load(path)
    data = Dataset(model, args.work, args.samples, "cross_entropy")
    lr = args.lr if args.lr is not None else (1e-3 if args.optimizer == "adamw" else 0.05)
    wd = 0.01 if args.optimizer == "adamw" else 1e-4

    plan = os.path.join(args.work, "plan.bin")
    metrics = os.path.join(args.work, "metrics.jsonl")
    cmd = ["fsdpc", path, "-o", plan, "--optimizer", args.optimizer, "--lr", repr(lr), "--weight-decay", repr(wd),
           "--world-size", str(args.ranks), "--strategy", args.strategy, "--wrap", args.wrap]
    if args.optimizer == "sgd":
        cmd += ["--momentum", repr(args.momentum)]
    if args.lr_schedule:
        cmd += ["--lr-schedule", args.lr_schedule, "--warmup-steps", str(args.warmup_steps), "--total-steps",
                str(args.total_steps), "--min-lr", repr(args.min_lr)]
    if args.clip_grad_norm:
        cmd += ["--clip-grad-norm", repr(args.clip_grad_norm)]
    if args.grad_accum > 1:
        cmd += ["--grad-accum", str(args.grad_accum)]
    if args.accum_reduce:
        cmd += ["--accum-reduce", args.accum_reduce]
    cmd += args.extra.split()
    run(cmd)
    launch = MPIRUN + ["-np", str(args.ranks)] if args.ranks > 1 else []
    length = ["--epochs", str(args.epochs)] if args.epochs else ["--steps", str(args.steps)]
    if args.epochs:
        # Whole global batches (each of K micro-batches) per epoch.
        args.steps = args.epochs * data.samples // (data.batch * args.grad_accum)
    shuffle = [] if args.shuffle_seed is None else ["--shuffle", "--seed", str(args.shuffle_seed)]
    run(launch + ["fsdp-run", plan, "--data", data.dir, "--metrics-json", metrics] + length + shuffle)
    records = sorted((json.loads(line) for line in open(metrics) if '"loss"' in line), key=lambda r: r["step"])

    schedule = (schedule_lambda(args.lr_schedule, args.warmup_steps, args.total_steps, args.min_lr, lr)
                if args.lr_schedule else None)
    trace = {}
    result = train_torch(model, data, args.steps, args.optimizer, lr, wd, args.momentum, "cross_entropy",
                         torch.float32, schedule, clip=args.clip_grad_norm, accumulate=args.grad_accum, trace=trace,
                         shuffle_seed=args.shuffle_seed)
    torch_losses = result[0]

    failures = 0
    if len(records) != args.steps:
        print("fsdp-run reported %d steps, expected %d" % (len(records), args.steps))
        failures += 1
    series = [("loss", [r["loss"] for r in records], torch_losses, args.rtol),
              ("lr", [r["lr"] for r in records], trace["lr"], 1e-6)]
    if args.clip_grad_norm:
        series.append(("grad_norm", [r.get("grad_norm", float("nan")) for r in records], trace["grad_norm"],
                       args.rtol))
        clipped = sum(n > args.clip_grad_norm for n in trace["grad_norm"])
        print("clip_grad_norm %g: torch clipped %d of %d steps" % (args.clip_grad_norm, clipped, args.steps))
    print("step  " + "  ".join("%-27s" % ("%s fsdpc / torch" % name) for name, _, _, _ in series))
    for step in range(min(args.steps, len(records))):
        print("%4d  " % step + "  ".join("%12.9g %12.9g  " % (ours[step], ref[step]) for _, ours, ref, _ in series))
    for name, ours, ref, rtol in series:
        worst = max((abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, ref)), default=float("inf"))
        if not worst <= rtol:  # also catches NaN
            failures += 1
        HEADROOM.add("%s vs torch" % name, worst, rtol)
        print("%s vs torch: worst relative difference %.2e (<= %g)%s" % (name, worst, rtol,
                                                                         "" if worst <= rtol else "  <-- FAIL"))
    HEADROOM.print()
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
