#!/usr/bin/python3
"""Writes what torch.onnx.export(..., dynamo=True, optimize=False) leaves
in a graph that libonnx 1.12 or fsdpc had refused: a Constant whose
`value_ints` is an empty list, a Shape slice that is empty (start == end)
in the Concat of a Reshape target (torch's repeat_interleave builds
[*shape[:0], -1, *shape[1:]] so), and Max and Min of integer tensors (an
index wrapped and clamped at run time); and a Cast to float64 and back
(Flux's rotary angles), which fsdpc computes in float32.

  unoptimized_dynamo.py OUT.onnx"""
import sys

import onnx
from onnx import TensorProto, helper

empty = onnx.AttributeProto(name="value_ints", type=onnx.AttributeProto.INTS)
nodes = [
    helper.make_node("Shape", ["x"], ["before"], start=0, end=0),
    helper.make_node("Constant", [], ["minusone"], value_ints=[-1]),
    helper.make_node("Shape", ["x"], ["after"], start=2),
    helper.make_node("Concat", ["before", "minusone", "after"], ["target"], axis=0),
    helper.make_node("Reshape", ["x", "target"], ["flat"]),
    helper.make_node("Max", ["index", "bound"], ["high"]),
    helper.make_node("Min", ["index", "bound"], ["low"]),
    helper.make_node("Constant", [], ["nothing"]),
    helper.make_node("Cast", ["x"], ["wide"], to=TensorProto.DOUBLE),
    helper.make_node("Cast", ["wide"], ["back"], to=TensorProto.FLOAT),
]
nodes[7].attribute.append(empty)
graph = helper.make_graph(
    nodes, "unoptimized",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3, 2]),
     helper.make_tensor_value_info("index", TensorProto.INT64, [4]),
     helper.make_tensor_value_info("bound", TensorProto.INT64, [4])],
    [helper.make_tensor_value_info("flat", TensorProto.FLOAT, [12, 2]),
     helper.make_tensor_value_info("high", TensorProto.INT64, [4]),
     helper.make_tensor_value_info("low", TensorProto.INT64, [4]),
     helper.make_tensor_value_info("nothing", TensorProto.INT64, [0]),
     helper.make_tensor_value_info("back", TensorProto.FLOAT, [4, 3, 2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
