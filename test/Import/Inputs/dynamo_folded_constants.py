#!/usr/bin/python3
"""Writes a small model as torch.onnx.export(..., dynamo=True) leaves it:
the graph signature and each node's FX node in metadata, and three
anonymous initializers the exporter's optimizer folded:

  val_1      fc.weight transposed (its reader's FX node names p_fc_weight),
  cos_table  a rotary table folded from a buffer (its reader names none),
  val_9      read only by a node the optimizer made (no FX metadata).

With --unaccounted, the signature also has a parameter 'pos.weight' that
no initializer or FX node accounts for (folded beyond recognition).

onnx 1.12's Python API has no metadata_props on graphs and nodes, so the
fields (NodeProto 9, GraphProto 16) are appended as protobuf bytes, which
parsing keeps as unknown fields.

  dynamo_folded_constants.py OUT.onnx [--unaccounted]"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def field(number, payload):
    """A length-delimited protobuf field."""
    def varint(n):
        out = b""
        while True:
            byte, n = n & 0x7F, n >> 7
            out += bytes([byte | (0x80 if n else 0)])
            if not n:
                return out
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def entry(key, value):
    return onnx.StringStringEntryProto(key=key, value=value).SerializeToString()


def with_fx(node, fx):
    tagged = onnx.NodeProto()
    tagged.ParseFromString(node.SerializeToString() + field(9, entry("pkg.torch.onnx.fx_node", fx)))
    return tagged


rng = np.random.default_rng(5)
initializers = [
    numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "val_1"),
    numpy_helper.from_array(np.cos(np.arange(8, dtype=np.float32)).reshape(2, 4), "cos_table"),
    numpy_helper.from_array(np.zeros((2, 4), np.float32), "val_9"),
]
nodes = [
    with_fx(helper.make_node("MatMul", ["x", "val_1"], ["linear"], name="node_linear"),
            "%linear : [num_users=1] = call_function[target=torch.ops.aten.linear.default]"
            "(args = (%x, %p_fc_weight), kwargs = {})"),
    with_fx(helper.make_node("Mul", ["linear", "cos_table"], ["mul"], name="node_mul"),
            "%mul : [num_users=1] = call_function[target=torch.ops.aten.mul.Tensor]"
            "(args = (%linear, %cos_table), kwargs = {})"),
    helper.make_node("Add", ["mul", "val_9"], ["y"], name="node_Add_9"),
]
graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], initializers)
signature = "p_fc_weight: PARAMETER target='fc.weight'\nb_inv_freq: BUFFER target='inv_freq'"
if "--unaccounted" in sys.argv[2:]:
    signature += "\np_pos_weight: PARAMETER target='pos.weight'"
tagged = onnx.GraphProto()
tagged.ParseFromString(graph.SerializeToString() +
                       field(16, entry("pkg.torch.export.ExportedProgram.graph_signature", signature)))
model = helper.make_model(tagged, opset_imports=[helper.make_opsetid("", 18)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
