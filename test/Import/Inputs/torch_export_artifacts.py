#!/usr/bin/python3
"""Writes a small ONNX model with the parameter rewrites torch.onnx.export
makes: a tied weight replaced by an anonymous transposed copy, equal
initializers merged behind an Identity, a -inf mask buffer, and an
anonymous folded weight whose module only its consumer's name tells.
With --external-data, the initializers are stored in a file beside it.
With --shared-copy, a second MatMul reads an Identity of the folded weight,
as the exporter writes one weight shared by two layers (ALBERT) or two
layers cloned with deepcopy.

  torch_export_artifacts.py OUT.onnx [--external-data] [--shared-copy]"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(3)
lin = rng.standard_normal((4, 3)).astype(np.float32)
initializers = [
    numpy_helper.from_array(lin, "lin.weight"),
    numpy_helper.from_array(np.ascontiguousarray(lin.T), "onnx::MatMul_7"),
    numpy_helper.from_array(np.ones(4, np.float32), "ln1.weight"),
    numpy_helper.from_array(np.array([0, 0, -np.inf, -np.inf], np.float32), "mask"),
    numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "onnx::MatMul_9"),
]
nodes = [
    helper.make_node("Identity", ["ln1.weight"], ["ln2.weight"], name="Identity_0"),
    helper.make_node("Gather", ["lin.weight", "ids"], ["e"], name="/emb/Gather", axis=0),
    helper.make_node("MatMul", ["x", "onnx::MatMul_7"], ["h"], name="/head/MatMul"),
    helper.make_node("Mul", ["h", "ln1.weight"], ["h1"], name="/ln1/Mul"),
    helper.make_node("Mul", ["h1", "ln2.weight"], ["h2"], name="/ln2/Mul"),
    helper.make_node("Add", ["h2", "mask"], ["h3"], name="/attn/Add"),
    helper.make_node("MatMul", ["h3", "onnx::MatMul_9"], ["y"], name="/blocks.0/fc/MatMul"),
]
if "--shared-copy" in sys.argv[2:]:
    nodes[-1].output[0] = "y0"
    nodes += [helper.make_node("Identity", ["onnx::MatMul_9"], ["onnx::MatMul_11"], name="Identity_1"),
              helper.make_node("MatMul", ["y0", "onnx::MatMul_11"], ["y"], name="/blocks.1/fc/MatMul")]
graph = helper.make_graph(nodes, "artifacts",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
                           helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])], initializers)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
if "--external-data" in sys.argv[2:]:
    # Every initializer in one data file beside the model, as large exports are.
    onnx.save(model, sys.argv[1], save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.data", size_threshold=0)
else:
    onnx.save(model, sys.argv[1])
