#!/usr/bin/python3
"""The PyTorch reference for the end-to-end tests, independent of fsdpc.

It interprets an ONNX graph with torch ops, starting from the ONNX file's
initializers, makes a dataset both sides train on, and trains with
torch.optim. Needs /usr/bin/python3 (torch, onnx, numpy).
"""
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

def read_safetensors(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": np.float32, "I64": np.int64}[entry["dtype"]]
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(entry["shape"])
    return out


def write_safetensors(path, arrays):
    """Writes float32 arrays as safetensors, the way torch users' tools do."""
    header, offset, blobs = {}, 0, []
    for name, array in arrays.items():
        blob = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class OnnxInTorch:
    """The forward pass of an ONNX graph, in torch ops (the MLP op set)."""

    def __init__(self, model):
        self.graph = model.graph
        self.params = {}
        self.constants = {}
        for init in self.graph.initializer:
            array = numpy_helper.to_array(init)
            if array.dtype.kind == "f":
                self.params[init.name] = torch.tensor(array.astype(np.float32), requires_grad=True)
            else:
                self.constants[init.name] = torch.tensor(array)

    def __call__(self, inputs):
        env = dict(self.constants)
        env.update(self.params)
        env.update(inputs)
        for node in self.graph.node:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            x = [env[name] if name else None for name in node.input]
            op = node.op_type
            if op == "Gemm":
                a = x[0].t() if attrs.get("transA", 0) else x[0]
                b = x[1].t() if attrs.get("transB", 0) else x[1]
                y = attrs.get("alpha", 1.0) * (a @ b)
                if len(x) > 2 and x[2] is not None:
                    y = y + attrs.get("beta", 1.0) * x[2]
            elif op == "MatMul":
                y = x[0] @ x[1]
            elif op in ("Add", "Sub", "Mul", "Div"):
                y = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div}[op](x[0], x[1])
            elif op == "Relu":
                y = torch.relu(x[0])
            elif op == "Tanh":
                y = torch.tanh(x[0])
            elif op == "Sigmoid":
                y = torch.sigmoid(x[0])
            elif op == "Identity":
                y = x[0]
            elif op == "Flatten":
                y = torch.flatten(x[0], attrs.get("axis", 1))
            elif op == "Reshape":
                y = torch.reshape(x[0], [int(d) for d in x[1]])
            elif op == "Constant":
                y = torch.tensor(numpy_helper.to_array(attrs["value"]))
            elif op == "Transpose":
                y = x[0].permute(*attrs.get("perm", list(reversed(range(x[0].dim())))))
            elif op == "Softmax":
                y = torch.softmax(x[0], attrs.get("axis", -1))
            elif op == "LogSoftmax":
                y = torch.log_softmax(x[0], attrs.get("axis", -1))
            else:
                raise NotImplementedError(op)
            env[node.output[0]] = y
        return [env[o.name] for o in self.graph.output]


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), result.stdout, result.stderr))
    return result.stdout



class Dataset:
    """Inputs ~ N(0, 1) and labels from a fixed random teacher (linear for
    cross-entropy, linear regression for mse), saved as npy for fsdp-run."""

    def __init__(self, model, work, samples, loss, seed=1234):
        initializers = {i.name for i in model.graph.initializer}
        (info,) = [i for i in model.graph.input if i.name not in initializers]
        self.input_name = info.name
        input_shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
        self.batch = input_shape[0]
        output_shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
        rng = np.random.default_rng(seed)
        self.dir = os.path.join(work, "data")
        os.makedirs(self.dir, exist_ok=True)
        self.samples = samples
        self.inputs = rng.standard_normal([samples] + input_shape[1:]).astype(np.float32)
        flat = self.inputs.reshape(samples, -1)
        label_positions = int(np.prod(output_shape[1:-1])) if len(output_shape) > 2 else 1
        if loss == "cross_entropy":
            teacher = rng.standard_normal([flat.shape[1], label_positions, output_shape[-1]])
            scores = np.einsum("sf,fpc->spc", flat, teacher)
            self.labels = scores.argmax(-1).reshape([samples] + output_shape[1:-1]).astype(np.int64)
        else:
            teacher = rng.standard_normal([flat.shape[1], int(np.prod(output_shape[1:]))]) / np.sqrt(flat.shape[1])
            self.labels = (flat @ teacher).reshape([samples] + output_shape[1:]).astype(np.float32)
        np.save(os.path.join(self.dir, self.input_name + ".npy"), self.inputs)
        np.save(os.path.join(self.dir, "labels.npy"), self.labels)


def schedule_lambda(kind, warmup, total, min_lr, lr):
    """transformers' get_{constant,linear,cosine}_schedule_with_warmup
    multipliers (with get_cosine_with_min_lr_schedule_with_warmup's floor),
    written out here as transformers writes them, for torch's LambdaLR."""
    def factor(current):
        if current < warmup:
            return float(current) / float(max(1, warmup))
        if kind == "constant":
            return 1.0
        if kind == "linear":
            value = max(0.0, float(total - current) / float(max(1, total - warmup)))
        else:
            progress = float(current - warmup) / float(max(1, total - warmup))
            value = max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(0.5) * 2.0 * progress)))
        if min_lr > 0:
            value = value * (1 - min_lr / lr) + min_lr / lr
        return value
    return factor


MASK64 = (1 << 64) - 1


def splitmix64(x):
    """runtime/include/fsdpc/runtime/Random.h's splitMix64, in Python ints."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def epoch_order(seed, epoch, samples):
    """fsdp-run --shuffle's sample order in `epoch`: Fisher-Yates over
    splitmix64 from the seed and the epoch, written out again here."""
    order = list(range(samples))
    state = splitmix64(seed ^ splitmix64(epoch))
    for i in range(samples - 1, 0, -1):
        state = splitmix64(state)
        j = state % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def train_torch(model, data, steps, optimizer, lr, weight_decay, momentum, loss, dtype=torch.float32, schedule=None,
                clip=0.0, accumulate=1, trace=None, shuffle_seed=None):
    """Per-step losses and final parameters (float64 numpy) of torch; with
    `schedule` (a LambdaLR multiplier), the learning rate of each step too.

    A torch training loop as users write it: with `clip`,
    torch.nn.utils.clip_grad_norm_(params, clip) before the optimizer step;
    with `accumulate` K, K micro-batches of data.batch samples per step, each
    loss divided by K before its backward (the step's loss is their sum).
    `trace`, a dict, receives per-step lists "lr" and (with clip) "grad_norm",
    the norm before clipping. With `shuffle_seed`, each epoch visits the
    samples in epoch_order."""
    net = OnnxInTorch(model)
    for name in net.params:
        net.params[name] = net.params[name].detach().to(dtype).requires_grad_(True)
    params = list(net.params.values())
    if optimizer == "adamw":
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, schedule) if schedule else None
    losses, rates, norms = [], [], []
    for step in range(steps):
        rates.append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        total = 0.0
        for micro in range(accumulate):
            first = (step * accumulate + micro) * data.batch
            positions = [first + j for j in range(data.batch)]
            if shuffle_seed is None:
                index = [p % data.samples for p in positions]
            else:
                orders = {}
                for p in positions:
                    if p // data.samples not in orders:
                        orders[p // data.samples] = epoch_order(shuffle_seed, p // data.samples, data.samples)
                index = [orders[p // data.samples][p % data.samples] for p in positions]
            (logits,) = net({data.input_name: torch.tensor(data.inputs[index]).to(dtype)})
            target = torch.tensor(data.labels[index])
            if loss == "cross_entropy":
                value = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
            else:
                value = F.mse_loss(logits, target.to(dtype))
            (value / accumulate).backward()
            total += value.item() / accumulate
        if clip:
            norms.append(torch.nn.utils.clip_grad_norm_(params, clip).item())
        opt.step()
        if scheduler:
            scheduler.step()
        losses.append(total if accumulate > 1 else value.item())
    if trace is not None:
        trace["lr"], trace["grad_norm"] = rates, norms
    params = {k: v.detach().double().numpy() for k, v in net.params.items()}
    return (losses, params, rates) if schedule else (losses, params)


def read_losses(metrics_path):
    """The per-step losses fsdp-run wrote with --metrics-json, in step order."""
    steps = read_steps(metrics_path)
    return [steps[step] for step in sorted(steps)]


def norm_rel(got, want):
    """||got - want|| / ||want|| in the 2-norm of the flattened tensor."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def read_steps(metrics_path):
    """{step: loss} from fsdp-run's --metrics-json."""
    steps = {}
    for line in open(metrics_path):
        record = json.loads(line)
        if "loss" in record:
            steps[record["step"]] = record["loss"]
    return steps


class Headroom:
    """The worst figure of each kind of check against its limit. A script
    prints these last, as `headroom CHECK: worst X, limit Y (Zx)` lines, so a
    run shows how close it came to failing (test/e2e/headroom.py collects
    them over repeated runs)."""

    def __init__(self):
        self.worst = {}

    def add(self, check, value, limit):
        ratio = value / limit if limit > 0 else float("inf")
        if check not in self.worst or ratio > self.worst[check][0]:
            self.worst[check] = (ratio, value, limit)

    def print(self):
        for check, (ratio, value, limit) in self.worst.items():
            print("headroom %s: worst %.2e, limit %.2e (%s)"
                  % (check, value, limit, "%.1fx" % (1 / ratio) if ratio > 0 else "exact"))


HEADROOM = Headroom()


def print_loss_comparison(ours, reference, rtol, steps, reference_name="torch fp32"):
    """Prints fsdpc's and torch's loss per step; returns the failures (steps
    beyond rtol, or a missing step). `rtol` is one tolerance or one a step."""
    failures = 0
    print("step  fsdpc           torch           rel.diff")
    for step, (a, b) in enumerate(zip(ours, reference)):
        rel = abs(a - b) / max(abs(b), 1e-12)
        limit = rtol[step] if isinstance(rtol, list) else rtol
        flag = "" if rel <= limit else "  <-- exceeds %.3g" % limit
        failures += bool(flag)
        HEADROOM.add("loss vs " + reference_name, rel, limit)
        print("%4d  %.9g  %.9g  %.2e%s" % (step, a, b, rel, flag))
    if len(ours) != steps:
        print("fsdp-run reported %d steps, expected %d" % (len(ours), steps))
        failures += 1
    return failures


def max_norm_rel(got, want):
    """max|got - want| / max|want|."""
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-12))


def export_example(name, work):
    """Exports examples/mlp's models into `work` and returns the path of `name`."""
    here = os.path.dirname(os.path.abspath(__file__))
    exporter = os.path.join(here, "..", "..", "examples", "mlp", "export.py")
    run([sys.executable, exporter, "--out-dir", work])
    return os.path.join(work, name + ".onnx")
