"""Writes a model whose logits add a row of zeros named as TorchScript's
constant folding names what it computed (`onnx::Add_7`): how BART's
final_logits_bias buffer arrives, and a [C, 1, 1] norm weight of ones
(`onnx::Mul_5`), how a GroupNorm's folded affine arrives.

  folded_buffer.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

weight = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "w")
bias = numpy_helper.from_array(np.zeros((1, 4), np.float32), "onnx::Add_7")
scale = numpy_helper.from_array(np.ones((3, 1, 1), np.float32), "onnx::Mul_5")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "onnx::Add_7"], ["logits"]),
     helper.make_node("Mul", ["image", "onnx::Mul_5"], ["scaled"]),
     helper.make_node("ReduceSum", ["logits"], ["a"], keepdims=0),
     helper.make_node("ReduceSum", ["scaled"], ["b"], keepdims=0),
     helper.make_node("Add", ["a", "b"], ["loss"])],
    "folded_buffer",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("image", TensorProto.FLOAT, [2, 3, 2, 2])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [weight, bias, scale])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
