"""Writes a model that gathers rows of six position tables: Marian's and
Pegasus's sinusoidal table (sines in the first half of the columns,
cosines in the second, computed in float64), Whisper's encoder's (the
same layout, other frequencies, phases computed in float32 as torch does,
1500 rows), the interleaved layout (sine, cosine, sine, ...), the Marian
table with one element off by 1e-3, a random table and a table of ones.

  sinusoidal_tables.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def marian(rows, width):
    phases = np.array([[p / np.power(10000, 2 * (j // 2) / width) for j in range(width)] for p in range(rows)])
    table = np.zeros((rows, width), np.float32)
    table[:, :width // 2] = np.sin(phases[:, 0::2])
    table[:, width // 2:] = np.cos(phases[:, 1::2])
    return table


def whisper(rows, width):
    increment = np.float32(np.log(10000) / (width // 2 - 1))
    inverse = np.exp(-increment * np.arange(width // 2, dtype=np.float32))
    phases = np.arange(rows, dtype=np.float32)[:, None] * inverse[None, :]
    return np.concatenate([np.sin(phases), np.cos(phases)], axis=1).astype(np.float32)


def interleaved(rows, width):
    phases = np.array([[p / np.power(10000, 2 * (j // 2) / width) for j in range(width)] for p in range(rows)])
    phases[:, 0::2] = np.sin(phases[:, 0::2])
    phases[:, 1::2] = np.cos(phases[:, 1::2])
    return phases.astype(np.float32)


perturbed = marian(64, 16)
perturbed[40, 3] += 1e-3
tables = {"marian": marian(512, 64), "whisper": whisper(1500, 384), "interleaved": interleaved(64, 16),
          "perturbed": perturbed, "random": np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32),
          "ones": np.ones((64, 16), np.float32)}
nodes, total = [], None
for name, table in tables.items():
    nodes.append(helper.make_node("Gather", [name, "ids"], ["rows_" + name], axis=0))
    nodes.append(helper.make_node("ReduceSum", ["rows_" + name], ["sum_" + name], keepdims=0))
    if total:
        nodes.append(helper.make_node("Add", [total, "sum_" + name], ["total_" + name]))
    total = "total_" + name if total else "sum_" + name
nodes.append(helper.make_node("Identity", [total], ["loss"]))
graph = helper.make_graph(nodes, "sinusoidal_tables", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                          [numpy_helper.from_array(table, name) for name, table in tables.items()])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
