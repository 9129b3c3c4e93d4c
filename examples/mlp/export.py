#!/usr/bin/python3
"""Exports the example MLPs to ONNX with torch (run with /usr/bin/python3).

mlp.onnx:       Linear(10, 2048) -> Linear(2048, 2048) -> Linear(2048, 5), no activations:
                the model from the FSDP description fsdpc started from.
mlp_relu.onnx:  the same with ReLU between the layers.

Both take `input` [batch, 10] and return `logits` [batch, 5]; the batch is
fixed at export (--batch, default 64) unless --dynamic-batch is given, in
which case fsdpc needs --batch-size.
"""
import argparse
import os

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, relu: bool, sizes=(10, 2048, 2048, 5)):
        super().__init__()
        self.fc1 = nn.Linear(sizes[0], sizes[1])
        self.fc2 = nn.Linear(sizes[1], sizes[2])
        self.fc3 = nn.Linear(sizes[2], sizes[3])
        self.relu = relu

    def forward(self, x):
        x = self.fc1(x)
        if self.relu:
            x = torch.relu(x)
        x = self.fc2(x)
        if self.relu:
            x = torch.relu(x)
        return self.fc3(x)


def export(model: nn.Module, path: str, batch: int, in_features: int, dynamic_batch: bool, opset: int = 13):
    example = torch.zeros(batch, in_features)
    dynamic_axes = {"input": {0: "batch"}, "logits": {0: "batch"}} if dynamic_batch else None
    torch.onnx.export(model, example, path, input_names=["input"], output_names=["logits"],
                      opset_version=opset, dynamic_axes=dynamic_axes, do_constant_folding=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dynamic-batch", action="store_true")
    parser.add_argument("--sizes", default="10,2048,2048,5", help="in,hidden1,hidden2,classes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    os.makedirs(args.out_dir, exist_ok=True)
    for name, relu in (("mlp", False), ("mlp_relu", True)):
        torch.manual_seed(args.seed)
        path = os.path.join(args.out_dir, name + ".onnx")
        export(MLP(relu, sizes), path, args.batch, sizes[0], args.dynamic_batch)
        print("wrote", path)


if __name__ == "__main__":
    main()
