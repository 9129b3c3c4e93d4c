#!/usr/bin/python3
"""Trains an ONNX model with fsdpc + fsdp-run and with PyTorch, and compares.

The torch side does not use fsdpc at all (see torch_reference.py). Every
step's loss must agree within --loss-rtol (relative) and the final
parameters within --param-rtol (max-norm relative: max|ours - torch| /
max|torch| per parameter).

Needs /usr/bin/python3 (torch, onnx, numpy) and fsdpc, fsdp-run on PATH.
"""
import argparse
import os
import sys

import onnx
import torch

from torch_reference import (Dataset, export_example, max_norm_rel, print_loss_comparison, read_losses,
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
    parser.add_argument("--loss-rtol", type=float, default=1e-4)
    parser.add_argument("--param-rtol", type=float, default=1e-4)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(2)

    path = export_example(args.model, args.work) if args.model in ("mlp", "mlp_relu") else args.model
    model = onnx.load(path)
    data = Dataset(model, args.work, args.samples, args.loss)
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
    run(compile_cmd)
    run(["fsdp-run", plan, "--steps", str(args.steps), "--data", data_dir, "--save", saved,
         "--metrics-json", metrics])
    ours = read_losses(metrics)
    our_params = read_safetensors(saved)

    # torch, in float32 (the reference) and in float64 (to show how far
    # float32 rounding alone moves torch's own result).
    def torch_run(dtype):
        return train_torch(model, data, args.steps, args.optimizer, lr, wd, args.momentum, args.loss, dtype)

    reference, torch_params = torch_run(torch.float32)
    _, exact_params = torch_run(torch.float64)

    failures = print_loss_comparison(ours, reference, args.loss_rtol, args.steps)
    for name, want in torch_params.items():
        got = our_params.get(name)
        if got is None or got.shape != want.shape:
            print("parameter %s: missing or misshaped in the saved state dict" % name)
            failures += 1
            continue
        rel = max_norm_rel(got, want)
        torch_rounding = max_norm_rel(want, exact_params[name])
        flag = "" if rel <= args.param_rtol else "  <-- exceeds %g" % args.param_rtol
        failures += bool(flag)
        print("param %-20s max-norm rel.diff %.2e   (torch fp32 vs torch fp64: %.2e)%s"
              % (name, rel, torch_rounding, flag))
    if sum(ours[-3:]) >= sum(ours[:3]):
        print("the loss did not fall: %g -> %g" % (ours[0], ours[-1]))
        failures += 1
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
