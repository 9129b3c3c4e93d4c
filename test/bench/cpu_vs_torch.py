#!/usr/bin/python3
"""CPU step time of fsdp-run against PyTorch 1.13 on the same model, data,
optimizer and thread count: prints a table of median step times (after
warm-up; each side's best over alternating rounds) and the ratio
ours / torch. Not a test: nothing is asserted.

  PATH=build/bin:$PATH /usr/bin/python3 test/bench/cpu_vs_torch.py [--threads 2] [--steps 30]

Before timing torch it checks that the system BLAS torch calls is OpenBLAS
(Debian's libopenblas0-pthread through update-alternatives); with the
reference BLAS torch is about 10x slower and the ratio means nothing.
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
from torch_reference import OnnxInTorch  # noqa: E402


def run(cmd, env=None):
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), result.stdout, result.stderr))
    return result.stdout


def blas_is_openblas():
    query = subprocess.run(["update-alternatives", "--query", "libblas.so.3-x86_64-linux-gnu"], capture_output=True,
                           text=True).stdout
    value = [line for line in query.split("\n") if line.startswith("Value:")]
    return bool(value) and "openblas" in value[0], value[0] if value else "unknown"


def fsdpc_timer(onnx_path, data_dir, compile_flags, threads, work):
    """Compiles once; the returned function runs fsdp-run and gives the
    median step time after warm-up."""
    plan = os.path.join(work, "plan.bin")
    metrics = os.path.join(work, "metrics.jsonl")
    run(["fsdpc", onnx_path, "-o", plan] + compile_flags)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))

    def median_ms(steps, warmup):
        run(["fsdp-run", plan, "--steps", str(steps + warmup), "--data", data_dir, "--metrics-json", metrics], env=env)
        times = [json.loads(l)["step_ms"] for l in open(metrics) if '"step_ms"' in l]
        return statistics.median(times[warmup:])
    return median_ms


def torch_timer(step_fn):
    def median_ms(steps, warmup):
        times = []
        for i in range(steps + warmup):
            start = time.perf_counter()
            step_fn(i)
            times.append((time.perf_counter() - start) * 1000)
        return statistics.median(times[warmup:])
    return median_ms


def best_of_rounds(ours, theirs, args):
    """Alternates the two for --rounds rounds and keeps each side's lowest
    median: a shared machine's busy spells then slow neither side's figure."""
    best_ours, best_theirs = float("inf"), float("inf")
    for _ in range(args.rounds):
        best_ours = min(best_ours, ours(args.steps, args.warmup))
        best_theirs = min(best_theirs, theirs(args.steps, args.warmup))
    return best_ours, best_theirs


def bench_mlp(args, work):
    run([sys.executable, os.path.join(ROOT, "examples", "mlp", "export.py"), "--out-dir", work])
    path = os.path.join(work, "mlp_relu.onnx")
    model = onnx.load(path)
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((4096, 10)).astype(np.float32)
    labels = rng.integers(0, 5, 4096).astype(np.int64)
    data = os.path.join(work, "mlp-data")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "input.npy"), inputs)
    np.save(os.path.join(data, "labels.npy"), labels)
    ours = fsdpc_timer(path, data, ["--lr", "1e-4"], args.threads, work)

    net = OnnxInTorch(model)
    optimizer = torch.optim.AdamW(list(net.params.values()), lr=1e-4, weight_decay=0.01)

    def step(i):
        index = slice((i * 64) % 4096, (i * 64) % 4096 + 64)
        (logits,) = net({"input": torch.tensor(inputs[index])})
        loss = F.cross_entropy(logits, torch.tensor(labels[index]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return ("MLP 4.2M params, batch 64, AdamW",) + best_of_rounds(ours, torch_timer(step), args)


def bench_decoder(example, title, args, work):
    """The example decoder `example` (gpt or llama) on its character corpus."""
    data = os.path.join(work, example + "-data")
    run([sys.executable, os.path.join(ROOT, "examples", "gpt", "prepare_data.py"), "--out-dir", data])
    path = os.path.join(work, example + ".onnx")
    run([sys.executable, os.path.join(ROOT, "examples", example, "export.py"), "--out", path, "--data-dir", data])
    ours = fsdpc_timer(path, data, ["--batch-size", "16", "--lr", "3e-3"], args.threads, work)
    spec = importlib.util.spec_from_file_location(example + "_model", os.path.join(ROOT, "examples", example, "model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    vocab = len(json.load(open(os.path.join(data, "vocab.json"))))
    torch.manual_seed(0)
    model = module.build(vocab)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    inputs = torch.tensor(np.load(os.path.join(data, "input_ids.npy")))
    labels = torch.tensor(np.load(os.path.join(data, "labels.npy")))

    def step(i):
        index = [(i * 16 + j) % len(inputs) for j in range(16)]
        logits = model(inputs[index])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[index].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return (title,) + best_of_rounds(ours, torch_timer(step), args)


def bench_gpt(args, work):
    return bench_decoder("gpt", "GPT 2 layers, dim 48, context 32, batch 16, AdamW", args, work)


def bench_llama(args, work):
    return bench_decoder("llama", "LLaMA 2 layers, dim 48, context 32, batch 16, AdamW", args, work)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds; each side's best median counts")
    args = parser.parse_args()
    openblas, blas = blas_is_openblas()
    if not openblas:
        sys.exit("torch would use %s, not OpenBLAS: install libopenblas0-pthread (tools/setup.sh does)" % blas)
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for bench in (bench_mlp, bench_gpt, bench_llama):
            rows.append(bench(args, work))
    print("CPU, %d threads, median of %d steps after %d warm-up, best of %d alternating rounds; torch %s on %s" % (
        args.threads, args.steps, args.warmup, args.rounds, torch.__version__, blas.split(":", 1)[1].strip()))
    print("%-52s %12s %12s %14s" % ("model", "fsdp-run ms", "torch ms", "ours / torch"))
    for name, ours, theirs in rows:
        print("%-52s %12.2f %12.2f %14.2f" % (name, ours, theirs, ours / theirs))


if __name__ == "__main__":
    main()
