#!/usr/bin/python3
"""Trains one model under several sharding configurations and compares each
with the single-rank run and with PyTorch.

A configuration is STRATEGY:N or hybrid_shard:N:G. For each, fsdpc compiles
the model for N ranks and `mpirun -np N fsdp-run` trains it on the same
global batches. Every step's loss and the final full parameters (gathered to
rank 0 with --save) must equal the single-rank run's within --rtol, and
torch's within --torch-loss-rtol / --torch-param-rtol.

Parameters are compared by their relative error in the 2-norm,
||a - b|| / ||b||, per parameter; the largest elementwise difference
relative to the largest element (max-norm) is printed next to it. The
max-norm is not asserted: splitting a batch over ranks changes the order in
which per-sample gradients are summed, and AdamW divides each gradient
element by its own running RMS, so a rounding-level difference in a
gradient element that is nearly zero becomes a step of up to lr. A few
hundred of the 4.2M elements of the example MLP's 2048x2048 layer move by
up to 2e-4 of the layer's largest weight that way (torch float32 itself
ends 5e-4 from torch float64 there), while the tensor as a whole stays
within 1e-6.

Needs /usr/bin/python3 (torch, onnx, numpy), and fsdpc, fsdp-run and mpirun
on PATH.
"""
import argparse
import os
import sys

import onnx

from torch_reference import (HEADROOM, Dataset, export_example, max_norm_rel, norm_rel, read_losses, read_safetensors, run,
                             train_torch)

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]


def parse_config(text):
    parts = text.split(":")
    strategy, ranks = parts[0], int(parts[1])
    group = int(parts[2]) if len(parts) > 2 else 0
    return strategy, ranks, group


def train_fsdpc(args, path, data, work, strategy, ranks, group, lr, wd):
    os.makedirs(work, exist_ok=True)
    plan = os.path.join(work, "plan.bin")
    cmd = ["fsdpc", path, "-o", plan, "--optimizer", args.optimizer, "--lr", repr(lr), "--weight-decay", repr(wd),
           "--world-size", str(ranks), "--strategy", strategy, "--wrap", args.wrap]
    if group:
        cmd += ["--shard-group-size", str(group)]
    if args.bucket_bytes:
        cmd += ["--bucket-bytes", args.bucket_bytes]
    if args.optimizer == "sgd":
        cmd += ["--momentum", repr(args.momentum)]
    run(cmd)
    saved = os.path.join(work, "full.safetensors")
    metrics = os.path.join(work, "metrics.jsonl")
    launch = MPIRUN + ["-np", str(ranks)] if ranks > 1 else []
    run(launch + ["fsdp-run", plan, "--steps", str(args.steps), "--data", data.dir, "--save", saved,
                  "--metrics-json", metrics])
    return read_losses(metrics), read_safetensors(saved)


def compare(label, losses, params, ref_losses, ref_params, loss_rtol, param_rtol):
    failures = 0
    worst_loss = 0.0
    for a, b in zip(losses, ref_losses):
        worst_loss = max(worst_loss, abs(a - b) / max(abs(b), 1e-12))
    if len(losses) != len(ref_losses):
        print("  %s: %d steps, expected %d" % (label, len(losses), len(ref_losses)))
        failures += 1
    worst_param, worst_name, worst_max = 0.0, "", 0.0
    for name, want in ref_params.items():
        got = params.get(name)
        if got is None or got.shape != want.shape:
            print("  %s: parameter %s missing or misshaped" % (label, name))
            failures += 1
            continue
        rel = norm_rel(got, want)
        worst_max = max(worst_max, max_norm_rel(got.astype("float64"), want.astype("float64")))
        if rel >= worst_param:
            worst_param, worst_name = rel, name
    HEADROOM.add("loss vs " + label, worst_loss, loss_rtol)
    HEADROOM.add("param l2 vs " + label, worst_param, param_rtol)
    bad = worst_loss > loss_rtol or worst_param > param_rtol
    failures += bad
    print("  vs %-7s losses %.2e (<= %g)  params %.2e (<= %g, worst %s; max-norm %.1e)%s"
          % (label, worst_loss, loss_rtol, worst_param, param_rtol, worst_name, worst_max,
             "  <-- FAIL" if bad else ""))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", help="ONNX file, or mlp / mlp_relu to export the examples")
    parser.add_argument("--work", required=True)
    parser.add_argument("--configs", required=True, help="space-separated STRATEGY:N or hybrid_shard:N:G")
    parser.add_argument("--wrap", default="none")
    parser.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    parser.add_argument("--bucket-bytes", default="", help="passed to fsdpc (collectives of small units bucketed)")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--samples", type=int, default=480)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--torch-loss-rtol", type=float, default=1e-4)
    parser.add_argument("--torch-param-rtol", type=float, default=1e-4)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    path = export_example(args.model, args.work) if args.model in ("mlp", "mlp_relu") else args.model
    model = onnx.load(path)
    data = Dataset(model, args.work, args.samples, "cross_entropy")
    lr = args.lr if args.lr is not None else (1e-3 if args.optimizer == "adamw" else 0.05)
    wd = 0.01 if args.optimizer == "adamw" else 1e-4

    torch_losses, torch_params = train_torch(model, data, args.steps, args.optimizer, lr, wd, args.momentum,
                                             "cross_entropy")
    base_losses, base_params = train_fsdpc(args, path, data, os.path.join(args.work, "single"), "full_shard", 1, 0,
                                           lr, wd)
    print("single rank: loss %.6g -> %.6g" % (base_losses[0], base_losses[-1]))
    failures = compare("torch", base_losses, base_params, torch_losses, torch_params, args.torch_loss_rtol,
                       args.torch_param_rtol)
    if sum(base_losses[-3:]) >= sum(base_losses[:3]):
        print("the loss did not fall: %g -> %g" % (base_losses[0], base_losses[-1]))
        failures += 1
    for config in args.configs.split():
        strategy, ranks, group = parse_config(config)
        losses, params = train_fsdpc(args, path, data, os.path.join(args.work, config.replace(":", "-")), strategy,
                                     ranks, group, lr, wd)
        print("%s (%d rank%s%s, %s):" % (strategy, ranks, "" if ranks == 1 else "s", ", groups of %d" % group if group else "", args.optimizer))
        failures += compare("1 rank", losses, params, base_losses, base_params, args.rtol, args.rtol)
        failures += compare("torch", losses, params, torch_losses, torch_params, args.torch_loss_rtol,
                            args.torch_param_rtol)
    HEADROOM.print()
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
