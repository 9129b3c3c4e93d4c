#!/usr/bin/env python3
"""A mixture of experts' projections on one GPU: fsdp-run's expert_matmul
kernels against the same products in torch, measured in one run.

The model is one MoE feed-forward layer in transformers' batched_mm form
(each token's top-k experts, row r = x[token] @ W1[expert of r], SiLU,
@ W2[expert of r], weighted and summed over its k experts, then a linear
head and cross entropy), which graph-fuse turns into expert_matmul and
expert_matmul_weight_grad. A short --profile run of its bf16 step gives
each kernel's time per call; torch then runs, on the same shapes in bf16:

  - dense: one [rows, K] x [K, F] GEMM (cuBLAS), the same FLOPs without the
    grouping: what a grouped GEMM can at best reach;
  - gathered: x[rows, 1, K] @ W[experts] (bmm of the gathered matrices,
    timed on GATHERED_ROWS rows and scaled),
    what the export computes when run as it is written.

Printed, not asserted: ms per call, TFLOP/s, and ours / dense.

  moe_gpu.py prepare --fsdpc BIN --out DIR      (/usr/bin/python3, torch 1.13)
      exports the layer (ONNX, opset 13) and compiles a weight-free bf16
      plan, DIR/moe-bf16.bin.
  moe_gpu.py run --fsdp-run BIN --plans DIR [--work DIR]   (torch 2.x, a GPU)
      random inputs, labels and N(0, 0.02^2) weights; the profile; torch.
"""
import os
import subprocess
import sys

import numpy as np

from gpu_bench_util import cuda_ms, prepare_or_run

# Mixtral's layer at a quarter of its width: 8 experts, top 2, 4096 tokens
# a step (8 x 512), so each expert sees about 1024 rows.
CONFIG = dict(dim=1024, hidden=3584, experts=8, top_k=2, classes=64)
BATCH, TOKENS = 8, 512
PROFILED_STEPS = 3


def build_layer(torch):
    nn = torch.nn

    class MoeLayer(nn.Module):
        def __init__(self, dim, hidden, experts, top_k, classes):
            super().__init__()
            self.top_k = top_k
            self.router = nn.Linear(dim, experts, bias=False)
            self.w1 = nn.Parameter(torch.randn(experts, dim, hidden) * 0.02)
            self.w2 = nn.Parameter(torch.randn(experts, hidden, dim) * 0.02)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):  # x [B, T, D]
            b, t, d = x.shape
            tokens = x.reshape(b * t, d)
            weights, experts = torch.topk(self.router(tokens).softmax(-1), self.top_k, dim=-1)
            experts = experts.reshape(-1)                                     # [N k]
            rows = tokens.unsqueeze(1).expand(b * t, self.top_k, d).reshape(-1, 1, d)  # [N k, 1, D]
            h = torch.nn.functional.silu(torch.matmul(rows, self.w1[experts]))
            y = torch.matmul(h, self.w2[experts]).reshape(b * t, self.top_k, d)
            mixed = (y * weights.unsqueeze(-1)).sum(1)
            return self.head(mixed).reshape(b, t, -1)

    return MoeLayer(**CONFIG)


def prepare(fsdpc, out):
    import torch

    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = build_layer(torch).eval()
    onnx_path = os.path.join(out, "moe.onnx")
    x = torch.zeros(1, TOKENS, CONFIG["dim"])
    torch.onnx.export(model, (x,), onnx_path, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13)
    plan = os.path.join(out, "moe-bf16.bin")
    subprocess.run([fsdpc, onnx_path, "-o", plan, "--no-weights", "--batch-size", str(BATCH), "--mixed-precision",
                    "bf16", "--optimizer", "adamw", "--lr", "1e-4"], check=True)
    os.remove(onnx_path)
    print("prepared %s (%.1f MB)" % (plan, os.path.getsize(plan) / 1e6))


def profile_rows(stdout):
    """{op: (calls, ms)} from fsdp-run --profile's table by kernel (its
    rows: kernel, calls, time, "ms"; the slowest instructions after it
    start with their index)."""
    rows = {}
    table = stdout[stdout.find("fsdp-run: time per kernel"):].splitlines()
    for line in table[2:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] != "ms" or not fields[1].isdigit():
            break
        rows[fields[0]] = (int(fields[1]), float(fields[2]))
    return rows


# The gathered bmm copies a [K, F] matrix per row (8192 rows of 7 MiB would
# be 56 GiB): it is timed on this many rows and scaled to all of them.
GATHERED_ROWS = 256


def torch_times(torch, rows, k, f, repeats=20):
    """ms per call of the dense GEMM (forward and the weights' gradient,
    x^T dy) and of the gathered bmm, the last scaled from GATHERED_ROWS."""
    e = CONFIG["experts"]
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(rows, f, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(e, k, f, device="cuda", dtype=torch.bfloat16)
    experts = torch.randint(0, e, (rows,), device="cuda")

    def timed(fn):
        return cuda_ms(torch, fn, repeats)

    return {"dense": timed(lambda: x @ w[0]),
            "dense weight grad": timed(lambda: x.t() @ dy),
            "gathered": timed(lambda: torch.bmm(x[:GATHERED_ROWS].unsqueeze(1), w[experts[:GATHERED_ROWS]]))
            * rows / GATHERED_ROWS}


def run_bench(fsdp_run, plans, work):
    import torch

    if not torch.cuda.is_available():
        print("SKIP: no GPU is visible to torch")
        return 77
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(0)
    samples = BATCH * (PROFILED_STEPS + 1)
    np.save(os.path.join(data, "x.npy"), rng.standard_normal((samples, TOKENS, CONFIG["dim"]), dtype=np.float32))
    np.save(os.path.join(data, "labels.npy"), rng.integers(0, CONFIG["classes"], (samples, TOKENS), dtype=np.int64))
    out = subprocess.run([fsdp_run, os.path.join(plans, "moe-bf16.bin"), "--device", "cuda", "--init",
                          "normal:0.02,0", "--data", data, "--steps", str(PROFILED_STEPS), "--profile"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stdout[-2000:], out.stderr[-2000:])
        print("RESULT: FAIL (fsdp-run)")
        return 1
    ours = profile_rows(out.stdout)
    for line in dict.fromkeys(l for l in out.stderr.splitlines() if l.startswith("fsdp-run: note")):
        print("  " + line)
    rows, d, h = BATCH * TOKENS * CONFIG["top_k"], CONFIG["dim"], CONFIG["hidden"]
    # Each row's product either way: [rows, d] x [d, h] and [rows, h] x [h, d].
    flops = 2.0 * rows * d * h
    theirs = {shape: torch_times(torch, rows, *shape) for shape in ((d, h), (h, d))}
    print("expert projections, %d rows over %d experts, D %d, F %d, bf16, per call:" % (
        rows, CONFIG["experts"], d, h))
    print("  %-34s %9s %9s %10s" % ("", "ms", "TFLOP/s", "vs dense"))
    dense = sum(t["dense"] for t in theirs.values()) / 2
    dense_grad = sum(t["dense weight grad"] for t in theirs.values()) / 2
    gathered = sum(t["gathered"] for t in theirs.values()) / 2
    lines = [("torch dense GEMM (same FLOPs)", dense, dense), ("torch x^T dy (same FLOPs)", dense_grad, dense_grad),
             ("torch bmm of gathered matrices (*)", gathered, dense)]
    for op, reference in (("expert_matmul", dense), ("expert_matmul_weight_grad", dense_grad)):
        if op in ours:
            calls, ms = ours[op]
            lines.append(("fsdp-run " + op, ms / calls, reference))
    for name, ms, reference in lines:
        print("  %-34s %9.3f %9.1f %10.2f" % (name, ms, flops / ms / 1e9, ms / reference))
    print("(torch rows: the mean of the up and down projections' shapes; ours: every call of the step;")
    print(" (*) timed on %d rows and scaled: all rows' copies would not fit)" % GATHERED_ROWS)
    missing = [op for op in ("expert_matmul", "expert_matmul_weight_grad") if op not in ours]
    print("RESULT:", "FAIL (no %s in the profile)" % ", ".join(missing) if missing else "PASS")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(prepare_or_run(__doc__, prepare, run_bench, "/tmp/fsdpc-moe-bench"))
