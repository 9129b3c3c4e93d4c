#!/usr/bin/python3
"""Trains a torchvision CNN (ResNet-18 or MobileNetV3-small, random init) with
fsdpc on N ranks and with PyTorch, and compares every step's loss, the
trained parameters and BatchNorm's running statistics.

The model is exported in training mode (TrainingMode.TRAINING: every
BatchNormalization normalises with its batch's statistics and has
training_mode=1, or at opset 13 the statistics outputs). Dropout is set to
p=0 before the export, because fsdpc's dropout masks are not torch's.

The reference is what torch DDP and FSDP compute without SyncBatchNorm: each
of the N ranks runs its own replica of the module on its own contiguous
slice of the global batch (so each normalises with its local batch and
updates its own running statistics), the gradients are averaged, and
torch.optim.SGD (momentum 0.9) updates the shared parameters. fsdp-run's
full state dict holds rank 0's buffers, as FSDP's does, so they are compared
with replica 0's.

Needs /usr/bin/python3 (torch, torchvision, onnx, numpy), and fsdpc,
fsdp-run and mpirun on PATH.
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

from torch_reference import HEADROOM, print_loss_comparison, read_losses, read_safetensors, run

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]
WRAP = {"resnet18": r"module:layer[0-9]", "mobilenet_v3_small": r"module:features\.[0-9]+"}
# Settings where torch's own fp32 training stays within a few 1e-6 of fp64
# over 10 steps (--spread shows it). A random-init CNN on random labels
# amplifies rounding quickly: ResNet-18 on 32x32 images has 1x1 positions
# in layer4, so with 4 images per rank each channel's batch statistics come
# from 4 numbers, and torch fp32 itself is 4e-2 from fp64 after 10 steps.
DEFAULTS = {"resnet18": {"batch": 16, "image": 64, "lr": 3e-5},
            "mobilenet_v3_small": {"batch": 8, "image": 32, "lr": 1e-3}}


def build(name, classes):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=classes)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model.train()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=sorted(WRAP), default="resnet18")
    parser.add_argument("--work", required=True)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--opset", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, help="the global batch (default: the model's in DEFAULTS)")
    parser.add_argument("--image", type=int, help="image height and width (default: the model's)")
    parser.add_argument("--static-batch", action="store_true", help="export without dynamic_axes")
    parser.add_argument("--lr", type=float, help="SGD learning rate (default: the model's)")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--param-rtol", type=float, default=0.05,
                        help="limit of the parameters' difference as a fraction of their update (torch fp32 itself "
                             "is 8e-3 from fp64 for ResNet-18 at 64x64)")
    parser.add_argument("--spread", action="store_true", help="also print torch fp32 against torch fp64")
    args = parser.parse_args()
    for key, value in DEFAULTS[args.model].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(2)
    classes = 10

    rng = np.random.default_rng(7)
    samples = args.batch * 4
    images = rng.standard_normal([samples, 3, args.image, args.image]).astype(np.float32)
    labels = rng.integers(0, classes, samples).astype(np.int64)
    data = os.path.join(args.work, "data")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "input.npy"), images)
    np.save(os.path.join(data, "labels.npy"), labels)

    model = build(args.model, classes)
    onnx_path = os.path.join(args.work, "model.onnx")
    sample = torch.tensor(images[: args.batch])
    # Tracing runs the module once in training mode, which updates its
    # running statistics: the file holds them so, and torch starts from them.
    torch.onnx.export(model, sample, onnx_path, opset_version=args.opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes=None if args.static_batch else {"input": {0: "batch"}, "logits": {0: "batch"}})

    plan = os.path.join(args.work, "plan.bin")
    metrics = os.path.join(args.work, "metrics.jsonl")
    final = os.path.join(args.work, "final.safetensors")
    run(["fsdpc", onnx_path, "-o", plan, "--batch-size", str(args.batch), "--world-size", str(args.ranks),
         "--optimizer", "sgd", "--lr", repr(args.lr), "--momentum", repr(args.momentum), "--strategy", "full_shard",
         "--wrap", WRAP[args.model]])
    launch = MPIRUN + ["-np", str(args.ranks)] if args.ranks > 1 else []
    run(launch + ["fsdp-run", plan, "--steps", str(args.steps), "--data", data, "--metrics-json", metrics,
                  "--save", final])
    ours = read_losses(metrics)
    saved = read_safetensors(final)

    # torch: one replica per rank, each on its slice of the global batch.
    def train_torch(dtype):
        shared_model = copy.deepcopy(model).to(dtype)
        replicas = [copy.deepcopy(shared_model) for _ in range(args.ranks)]
        optimizer = torch.optim.SGD(shared_model.parameters(), lr=args.lr, momentum=args.momentum)
        local = args.batch // args.ranks
        losses = []
        for step in range(args.steps):
            optimizer.zero_grad()
            total = 0.0
            for rank, replica in enumerate(replicas):
                with torch.no_grad():
                    for mine, shared in zip(replica.parameters(), shared_model.parameters()):
                        mine.copy_(shared)
                replica.zero_grad()
                index = [(step * args.batch + rank * local + j) % samples for j in range(local)]
                logits = replica(torch.tensor(images[index]).to(dtype))
                loss = F.cross_entropy(logits, torch.tensor(labels[index])) / args.ranks
                loss.backward()
                total += loss.item()
                for mine, shared in zip(replica.parameters(), shared_model.parameters()):
                    shared.grad = mine.grad.clone() if shared.grad is None else shared.grad + mine.grad
            optimizer.step()
            losses.append(total)
        return shared_model, replicas[0], losses

    trained, replica0, reference = train_torch(torch.float32)
    initial = {k: v.detach().double().numpy() for k, v in model.named_parameters()}
    buffer_names = [k for k, _ in model.named_buffers() if not k.endswith("num_batches_tracked")]

    def state_of(shared, replica):
        state = {k: v.detach().double().numpy() for k, v in shared.named_parameters()}
        state.update({k: v.detach().double().numpy() for k, v in replica.named_buffers() if k in buffer_names})
        return state

    def state_differences(got, want):
        """The trained parameters' distance from `want`'s as a fraction of
        how far training moved them (one tensor's update can be all
        rounding: a bias just before a BatchNorm gets almost no gradient),
        and the worst running statistic relative to its largest element."""
        diff = sum(float(np.sum((want[k] - got[k]) ** 2)) for k in initial)
        moved = sum(float(np.sum((want[k] - initial[k]) ** 2)) for k in initial)
        def scale(k):
            # A running mean can be all rounding (a 1x1 convolution of a
            # BatchNorm's output has mean 0): it is measured against the
            # channel's standard deviation too.
            if k.endswith("running_mean"):
                return max(np.max(np.abs(want[k])), np.max(np.sqrt(want[k[: -len("mean")] + "var"])))
            return np.max(np.abs(want[k]))
        stats = [(float(np.max(np.abs(got[k] - want[k])) / scale(k)), k) for k in buffer_names]
        return float(np.sqrt(diff / moved)), max(stats)

    print("%s opset %d on %d rank(s), batch %d of %dx%d images%s, %d parameters, %d running statistics" % (
        args.model, args.opset, args.ranks, args.batch, args.image, args.image,
        " (static in the export)" if args.static_batch else "", len(initial), len(buffer_names)))
    failures = print_loss_comparison(ours, reference, args.rtol, args.steps, "torch fp32")
    missing = [k for k in list(initial) + buffer_names if k not in saved]
    if missing:
        print("missing from fsdp-run's saved state dict: " + ", ".join(missing))
        sys.exit(1)
    params_rel, (stats_rel, stats_name) = state_differences({k: v.astype(np.float64) for k, v in saved.items()},
                                                            state_of(trained, replica0))
    param_limit = args.param_rtol
    HEADROOM.add("parameter updates vs torch", params_rel, param_limit)
    HEADROOM.add("running statistics vs torch", stats_rel, args.rtol)
    print("parameters: |fsdpc - torch| / |torch - initial| = %.2e%s" % (
        params_rel, " exceeds %.0e" % param_limit if params_rel > param_limit else ""))
    print("running statistics of rank 0: worst relative difference %.2e (%s)%s" % (
        stats_rel, stats_name, " exceeds %.0e" % args.rtol if stats_rel > args.rtol else ""))
    failures += int(params_rel > param_limit) + int(stats_rel > args.rtol)
    if args.spread:
        # How far fp32 rounding alone moves torch: what a limit must clear.
        exact_shared, exact_replica, exact = train_torch(torch.float64)
        print("torch fp32 vs fp64, loss per step: " +
              " ".join("%.1e" % (abs(a - b) / abs(b)) for a, b in zip(reference, exact)))
        params_spread, (stats_spread, _) = state_differences(state_of(trained, replica0),
                                                             state_of(exact_shared, exact_replica))
        print("torch fp32 vs fp64: parameters %.2e, running statistics %.2e" % (params_spread, stats_spread))
    HEADROOM.print()
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
