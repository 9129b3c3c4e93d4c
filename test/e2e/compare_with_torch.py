#!/usr/bin/python3
"""Trains an ONNX model with fsdpc + fsdp-run and with PyTorch, and compares.

The torch side does not use fsdpc at all (see torch_reference.py). Every
step's loss must agree with torch float32's within --loss-rtol (relative).

The final parameters are measured against torch run in float64, the exact
answer float32 rounding only approximates, and so is torch float32: fsdpc's
distance from float64 must be within --spread-factor times torch float32's
own distance (or within the floor, where torch's is tiny), per parameter,
in two norms:

- the 2-norm, ||p - exact|| / ||exact||: the tensor as a whole. Rounding
  moves it by ~1e-6 even under AdamW, so a wrong optimizer shows here: a
  missing weight decay alone moves it by lr * wd * steps (2e-4 by default).
  Floor: --param-l2-floor.
- the max-norm, max|p - exact| / max|exact|: the worst element. AdamW
  divides each gradient element by its own running RMS, so a rounding-level
  difference in a gradient element that is nearly zero becomes a step of up
  to lr: a few elements of a large layer move by ~5e-4 of the largest
  weight, by an amount that depends on the processor's BLAS summation
  order. Comparing with torch's own float32 spread, measured in the same
  run, keeps the limit true on every machine. Floor: --param-max-floor.

Needs /usr/bin/python3 (torch, onnx, numpy) and fsdpc, fsdp-run on PATH.
"""
import argparse
import json
import os
import sys

import onnx
import torch

from torch_reference import (schedule_lambda, HEADROOM, Dataset, export_example, max_norm_rel, norm_rel, print_loss_comparison, read_losses,
                             read_safetensors, run, train_torch)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", help="ONNX file, or mlp / mlp_relu to export the examples")
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=None)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--samples", type=int, default=320)
    parser.add_argument("--loss", choices=["cross_entropy", "mse"], default="cross_entropy")
    parser.add_argument("--seed", type=int, default=1234, help="of the synthetic data set")
    parser.add_argument("--lr-schedule", choices=["constant", "linear", "cosine"], default=None)
    parser.add_argument("--warmup-steps", type=int, default=0)
    parser.add_argument("--total-steps", type=int, default=0)
    parser.add_argument("--min-lr", type=float, default=0.0)
    parser.add_argument("--loss-rtol", type=float, default=1e-4)
    parser.add_argument("--spread-factor", type=float, default=5.0,
                        help="how far from float64 fsdpc may be, in multiples of torch float32's distance")
    parser.add_argument("--param-l2-floor", type=float, default=1e-5)
    parser.add_argument("--param-max-floor", type=float, default=1e-4)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(2)

    path = export_example(args.model, args.work) if args.model in ("mlp", "mlp_relu") else args.model
    model = onnx.load(path)
    data = Dataset(model, args.work, args.samples, args.loss, args.seed)
    data_dir = data.dir

    lr = args.lr if args.lr is not None else (1e-3 if args.optimizer == "adamw" else 0.05)
    wd = args.weight_decay if args.weight_decay is not None else (0.01 if args.optimizer == "adamw" else 1e-4)

    # fsdpc.
    plan = os.path.join(args.work, "plan.bin")
    saved = os.path.join(args.work, "trained.safetensors")
    metrics = os.path.join(args.work, "metrics.jsonl")
    compile_cmd = ["fsdpc", path, "-o", plan, "--loss", args.loss, "--optimizer", args.optimizer,
                   "--lr", repr(lr), "--weight-decay", repr(wd)]
    if args.optimizer == "sgd":
        compile_cmd += ["--momentum", repr(args.momentum)]
    if args.lr_schedule:
        compile_cmd += ["--lr-schedule", args.lr_schedule, "--warmup-steps", str(args.warmup_steps),
                        "--total-steps", str(args.total_steps), "--min-lr", repr(args.min_lr)]
    run(compile_cmd)
    run(["fsdp-run", plan, "--steps", str(args.steps), "--data", data_dir, "--save", saved,
         "--metrics-json", metrics])
    ours = read_losses(metrics)
    our_params = read_safetensors(saved)

    # torch, in float32 (the reference) and in float64 (to show how far
    # float32 rounding alone moves torch's own result).
    schedule = (schedule_lambda(args.lr_schedule, args.warmup_steps, args.total_steps, args.min_lr, lr)
                if args.lr_schedule else None)

    def torch_run(dtype):
        result = train_torch(model, data, args.steps, args.optimizer, lr, wd, args.momentum, args.loss, dtype,
                             schedule)
        return result[:2]

    reference, torch_params = torch_run(torch.float32)
    _, exact_params = torch_run(torch.float64)

    failures = print_loss_comparison(ours, reference, args.loss_rtol, args.steps)
    if schedule:
        # The learning rate of every step, as fsdp-run reports it, against
        # torch's scheduler.
        _, _, torch_rates = train_torch(model, data, args.steps, args.optimizer, lr, wd, args.momentum, args.loss,
                                        torch.float32, schedule)
        our_rates = [json.loads(line)["lr"] for line in open(metrics) if '"loss"' in line]
        worst = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(our_rates, torch_rates))
        print("lr schedule %s: %s" % (args.lr_schedule, " ".join("%.6g" % r for r in our_rates)))
        print("lr per step vs torch LambdaLR: worst relative difference %.2e" % worst)
        if len(our_rates) != len(torch_rates) or worst > 1e-6:
            failures += 1
    print("param                 norm  fsdpc-fp64  torch32-fp64  limit")
    for name, exact in exact_params.items():
        got = our_params.get(name)
        if got is None or got.shape != exact.shape:
            print("parameter %s: missing or misshaped in the saved state dict" % name)
            failures += 1
            continue
        for norm, distance, floor in (("l2", norm_rel, args.param_l2_floor),
                                      ("max", max_norm_rel, args.param_max_floor)):
            ours_off = distance(got, exact)
            torch_off = distance(torch_params[name], exact)
            limit = max(floor, args.spread_factor * torch_off)
            flag = "" if ours_off <= limit else "  <-- exceeds"
            failures += bool(flag)
            HEADROOM.add("param %s vs float64" % norm, ours_off, limit)
            print("param %-15s %-4s  %.2e    %.2e      %.2e%s" % (name, norm, ours_off, torch_off, limit, flag))
    if sum(ours[-3:]) >= sum(ours[:3]):
        print("the loss did not fall: %g -> %g" % (ours[0], ours[-1]))
        failures += 1
    HEADROOM.print()
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
