#!/usr/bin/python3
"""Trains a small recurrent language model (embedding, a 2-layer nn.LSTM or
a bidirectional nn.GRU, a linear head over the vocabulary; random init)
exported by torch.onnx.export with fsdpc on N ranks and with PyTorch, and
compares every step's loss and the trained parameters.

torch's exporter writes nn.LSTM / nn.GRU as ONNX LSTM / GRU nodes (one per
layer, the weights' gates reordered to ONNX's by Slice and Concat of the
module's parameters); fsdpc unrolls them over the sequence. The reference
trains the module itself on the whole global batch with torch.optim.AdamW:
the mean of the ranks' equal halves' mean losses is the global mean, so N
ranks follow the same trajectory.

Needs /usr/bin/python3 (torch, onnx, numpy), and fsdpc, fsdp-run and mpirun
on PATH.
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from torch_reference import HEADROOM, print_loss_comparison, read_losses, read_safetensors, run

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]


class RecurrentLanguageModel(torch.nn.Module):
    def __init__(self, cell, vocab, width, hidden):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        if cell == "lstm":
            self.rnn = torch.nn.LSTM(width, hidden, num_layers=2, batch_first=True)
            out = hidden
        else:
            self.rnn = torch.nn.GRU(width, hidden, bidirectional=True)
            out = 2 * hidden
        self.batch_first = cell == "lstm"
        self.head = torch.nn.Linear(out, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        if not self.batch_first:  # the GRU runs time-major: ONNX's layout
            x = x.transpose(0, 1)
        y, _ = self.rnn(x)
        if not self.batch_first:
            y = y.transpose(0, 1)
        return self.head(y)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    parser.add_argument("--work", required=True)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--opset", type=int, default=14)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=8, help="the global batch")
    parser.add_argument("--sequence", type=int, default=12)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--param-rtol", type=float, default=1e-3,
                        help="limit of the parameters' difference as a fraction of their update")
    parser.add_argument("--spread", action="store_true", help="also print torch fp32 against torch fp64")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(2)
    vocab, width, hidden = 50, 16, 24

    rng = np.random.default_rng(3)
    samples = args.batch * 4
    tokens = rng.integers(0, vocab, [samples, args.sequence + 1]).astype(np.int64)
    data = os.path.join(args.work, "data")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "input.npy"), tokens[:, :-1])
    np.save(os.path.join(data, "labels.npy"), tokens[:, 1:])

    torch.manual_seed(0)
    model = RecurrentLanguageModel(args.cell, vocab, width, hidden)
    onnx_path = os.path.join(args.work, "model.onnx")
    sample = torch.tensor(tokens[: args.batch, :-1])
    # A symbolic batch, as users export for sharding: the exporter builds
    # the zero initial states from the input's batch dimension.
    torch.onnx.export(model, sample, onnx_path, opset_version=args.opset, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})

    plan = os.path.join(args.work, "plan.bin")
    metrics = os.path.join(args.work, "metrics.jsonl")
    final = os.path.join(args.work, "final.safetensors")
    run(["fsdpc", onnx_path, "-o", plan, "--batch-size", str(args.batch), "--world-size", str(args.ranks), "--optimizer", "adamw", "--lr",
         repr(args.lr), "--weight-decay", "0.01", "--strategy", "full_shard", "--wrap", "module:rnn"])
    launch = MPIRUN + ["-np", str(args.ranks)] if args.ranks > 1 else []
    run(launch + ["fsdp-run", plan, "--steps", str(args.steps), "--data", data, "--metrics-json", metrics,
                  "--save", final])
    ours = read_losses(metrics)
    saved = read_safetensors(final)

    def train_torch(dtype):
        net = copy.deepcopy(model).to(dtype)
        optimizer = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=0.01)
        losses = []
        for step in range(args.steps):
            optimizer.zero_grad()
            index = [(step * args.batch + j) % samples for j in range(args.batch)]
            logits = net(torch.tensor(tokens[index, :-1]))
            loss = F.cross_entropy(logits.reshape(-1, vocab), torch.tensor(tokens[index, 1:]).reshape(-1))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return net, losses

    trained, reference = train_torch(torch.float32)
    initial = {k: v.detach().double().numpy() for k, v in model.named_parameters()}
    missing = [k for k in initial if k not in saved]
    print("%s on %d rank(s), batch %d of %d tokens, %d parameters" % (
        "2-layer LSTM" if args.cell == "lstm" else "bidirectional GRU", args.ranks, args.batch, args.sequence,
        len(initial)))
    if missing:
        print("missing from fsdp-run's saved state dict: " + ", ".join(missing))
        sys.exit(1)
    failures = print_loss_comparison(ours, reference, args.rtol, args.steps, "torch fp32")
    want = {k: v.detach().double().numpy() for k, v in trained.named_parameters()}
    diff = sum(float(np.sum((want[k] - saved[k].astype(np.float64)) ** 2)) for k in initial)
    moved = sum(float(np.sum((want[k] - initial[k]) ** 2)) for k in initial)
    params_rel = float(np.sqrt(diff / moved))
    HEADROOM.add("parameter updates vs torch", params_rel, args.param_rtol)
    print("parameters: |fsdpc - torch| / |torch - initial| = %.2e%s" % (
        params_rel, " exceeds %.0e" % args.param_rtol if params_rel > args.param_rtol else ""))
    failures += int(params_rel > args.param_rtol)
    if args.spread:
        exact_net, exact = train_torch(torch.float64)
        print("torch fp32 vs fp64, loss per step: " +
              " ".join("%.1e" % (abs(a - b) / abs(b)) for a, b in zip(reference, exact)))
    HEADROOM.print()
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
