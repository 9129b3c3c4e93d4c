#!/usr/bin/python3
"""Checks a model fsdp-run --save-onnx wrote against the one it came from:

  check_saved_onnx.py ORIGINAL.onnx TRAINED.onnx TRAINED.safetensors INPUTS_DIR OUTPUTS_DIR

- TRAINED passes the ONNX checker;
- it is ORIGINAL with only initializer data changed: the same nodes, inputs,
  outputs, opsets and initializer names, types and shapes;
- every initializer fsdp-run trained holds the trained values
  (TRAINED.safetensors, from --save) bit for bit;
- its forward pass in torch (torch_reference.OnnxInTorch) on
  INPUTS_DIR/<input>.npy equals OUTPUTS_DIR/<output>.npy (fsdp-run --forward
  of the trained parameters) within 1e-6 relative in the max-norm.
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from torch_reference import OnnxInTorch, read_safetensors

original, trained, weights, inputs_dir, outputs_dir = sys.argv[1:6]
a, b = onnx.load(original), onnx.load(trained)
onnx.checker.check_model(b)
print("checker: ok")
failures = 0


def skeleton(model):
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for init in copy.graph.initializer:
        init.ClearField("raw_data")
        init.ClearField("float_data")
    return copy.SerializeToString()


if skeleton(a) != skeleton(b):
    print("the graph differs from the original beyond initializer data")
    failures += 1
else:
    print("graph: the original's, initializer data aside")
saved = read_safetensors(weights)
inits = {i.name: numpy_helper.to_array(i) for i in b.graph.initializer}
changed = [name for name in saved if name in inits and np.array_equal(inits[name], saved[name])]
missing = sorted(set(saved) - set(changed))
print("trained initializers: %d of %d hold the trained values" % (len(changed), len(saved)))
failures += bool(missing)
net = OnnxInTorch(b)
init_names = {i.name for i in b.graph.initializer}
feeds = {}
for info in b.graph.input:
    if info.name not in init_names:
        feeds[info.name] = torch.tensor(np.load(os.path.join(inputs_dir, info.name + ".npy")))
with torch.no_grad():
    results = net(feeds)
for info, got in zip(b.graph.output, results):
    want = np.load(os.path.join(outputs_dir, info.name + ".npy")).astype(np.float64)
    got = got.detach().double().numpy()
    rel = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    bad = not rel <= 1e-6
    failures += bad
    print("output %s: torch on the saved model vs fsdp-run --forward: %.2e (<= 1e-06)%s" % (
        info.name, rel, "  <-- FAIL" if bad else ""))
print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
sys.exit(1 if failures else 0)
