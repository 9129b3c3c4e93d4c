#!/usr/bin/python3
"""Trains an ONNX model with fsdpc + fsdp-run and with PyTorch, and compares.

The torch side does not use fsdpc at all: it interprets the ONNX graph with
torch ops, starting from the initializers in the ONNX file, and trains with
torch.optim on the same data. Every step's loss must agree within --loss-rtol
(relative) and the final parameters within --param-rtol (max-norm relative:
max|ours - torch| / max|torch| per parameter).

Needs /usr/bin/python3 (torch, onnx, numpy) and fsdpc, fsdp-run on PATH.
"""
import argparse
import json
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
        assert entry["dtype"] == "F32", entry
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(entry["shape"])
    return out


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

    path = args.model
    if path in ("mlp", "mlp_relu"):
        here = os.path.dirname(os.path.abspath(__file__))
        exporter = os.path.join(here, "..", "..", "examples", "mlp", "export.py")
        run([sys.executable, exporter, "--out-dir", args.work])
        path = os.path.join(args.work, path + ".onnx")
    model = onnx.load(path)
    initializers = {i.name for i in model.graph.initializer}
    (input_info,) = [i for i in model.graph.input if i.name not in initializers]
    input_shape = [d.dim_value for d in input_info.type.tensor_type.shape.dim]
    batch = input_shape[0]
    output_shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]

    # The same data for both: inputs ~ N(0, 1), labels from a fixed random
    # linear teacher, so the loss can really fall.
    rng = np.random.default_rng(1234)
    data_dir = os.path.join(args.work, "data")
    os.makedirs(data_dir, exist_ok=True)
    inputs = rng.standard_normal([args.samples] + input_shape[1:]).astype(np.float32)
    flat = inputs.reshape(args.samples, -1)
    label_positions = int(np.prod(output_shape[1:-1])) if len(output_shape) > 2 else 1
    if args.loss == "cross_entropy":
        teacher = rng.standard_normal([flat.shape[1], label_positions, output_shape[-1]])
        scores = np.einsum("sf,fpc->spc", flat, teacher)
        labels = scores.argmax(-1).reshape([args.samples] + output_shape[1:-1]).astype(np.int64)
    else:
        teacher = rng.standard_normal([flat.shape[1], int(np.prod(output_shape[1:]))]) / np.sqrt(flat.shape[1])
        labels = (flat @ teacher).reshape([args.samples] + output_shape[1:]).astype(np.float32)
    np.save(os.path.join(data_dir, input_info.name + ".npy"), inputs)
    np.save(os.path.join(data_dir, "labels.npy"), labels)

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
    ours = [json.loads(line)["loss"] for line in open(metrics)]
    our_params = read_safetensors(saved)

    # torch, in float32 (the reference) and in float64 (to show how far
    # float32 rounding alone moves torch's own result).
    def train_torch(dtype):
        net = OnnxInTorch(model)
        for name in net.params:
            net.params[name] = net.params[name].detach().to(dtype).requires_grad_(True)
        params = list(net.params.values())
        if args.optimizer == "adamw":
            optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=wd)
        else:
            optimizer = torch.optim.SGD(params, lr=lr, momentum=args.momentum, weight_decay=wd)
        losses = []
        for step in range(args.steps):
            index = [(step * batch + j) % args.samples for j in range(batch)]
            (logits,) = net({input_info.name: torch.tensor(inputs[index]).to(dtype)})
            target = torch.tensor(labels[index])
            if args.loss == "cross_entropy":
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
            else:
                loss = F.mse_loss(logits, target.to(dtype))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses, {k: v.detach().double().numpy() for k, v in net.params.items()}

    reference, torch_params = train_torch(torch.float32)
    _, exact_params = train_torch(torch.float64)

    failures = 0
    print("step  fsdpc           torch           rel.diff")
    for step, (a, b) in enumerate(zip(ours, reference)):
        rel = abs(a - b) / max(abs(b), 1e-12)
        flag = "" if rel <= args.loss_rtol else "  <-- exceeds %g" % args.loss_rtol
        failures += bool(flag)
        print("%4d  %.9g  %.9g  %.2e%s" % (step, a, b, rel, flag))
    if len(ours) != args.steps:
        print("fsdp-run reported %d steps, expected %d" % (len(ours), args.steps))
        failures += 1
    for name, want in torch_params.items():
        got = our_params.get(name)
        if got is None or got.shape != want.shape:
            print("parameter %s: missing or misshaped in the saved state dict" % name)
            failures += 1
            continue
        rel = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-12))
        exact = exact_params[name]
        torch_rounding = float(np.max(np.abs(want - exact)) / max(np.max(np.abs(exact)), 1e-12))
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
