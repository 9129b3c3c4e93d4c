#!/usr/bin/python3
"""Writes the hostile models of test/CLI/hostile-input.test into DIR: a one-
Add model whose initializer `w` is each time crafted to reach outside what
the model may read, or to claim more elements than its bytes hold.

  hostile_models.py DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def model_with(w, shape=(4,)):
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "hostile",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def external(name, location, offset=None, length=None):
    w = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = w.external_data.add()
            entry.key, entry.value = key, str(value)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "weights.bin"), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())
    onnx.save(model_with(w), os.path.join(folder, "model.onnx"))
    return folder


external("good", "weights.bin")
external("dotdot", "../../../../../../etc/passwd")
external("absolute", "/proc/self/environ")
link = external("symlink", "link.bin")
if not os.path.lexists(os.path.join(link, "link.bin")):
    os.symlink("/etc/passwd", os.path.join(link, "link.bin"))
external("offset", "weights.bin", offset=12)
external("length", "weights.bin", length=8)
external("garbage", "weights.bin", offset="1e3")


def claimed(name, dims, raw):
    """x [1] + w: the output takes w's claimed dims."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims, raw_data=raw)
    model = model_with(w, shape=(1,))
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_value = max(dims[0], 1)
    onnx.save(model, os.path.join(out, name + ".onnx"))


# An initializer nothing reads, so that only fsdpc's reader sees its dims.
unused = model_with(numpy_helper.from_array(np.zeros(4, np.float32), "w"))
unused.graph.initializer.append(TensorProto(name="spare", data_type=TensorProto.FLOAT, dims=[-2],
                                            raw_data=np.zeros(2, np.float32).tobytes()))
onnx.save(unused, os.path.join(out, "negative.onnx"))
claimed("huge", [1 << 40], np.zeros(2, np.float32).tobytes())
claimed("big", [(1 << 31) - 1], np.zeros(640, np.float32).tobytes())

# A symbolic batch, for --batch-size values whose sizes would wrap around.
batched = model_with(numpy_helper.from_array(np.zeros(4, np.float32), "w"))
for value in (batched.graph.input[0], batched.graph.output[0]):
    dims = value.type.tensor_type.shape.dim
    dims.insert(0, onnx.TensorShapeProto.Dimension(dim_param="batch"))
onnx.save(batched, os.path.join(out, "batched.onnx"))

# A Constant whose raw data is cut short, read by a Reshape: libonnx's shape
# inference (data propagation) crashed on it.
short = TensorProto(name="c", data_type=TensorProto.INT64, dims=[2], raw_data=b"\x02\x00\x00")
graph = helper.make_graph([helper.make_node("Constant", [], ["shape"], value=short, name="c"),
                           helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")], "short",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out, "short.onnx"))

# LayerNormalization with axis INT64_MAX.
graph = helper.make_graph([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=2**63 - 1, name="ln")],
                          "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                          [numpy_helper.from_array(np.ones(4, np.float32), "s"),
                           numpy_helper.from_array(np.zeros(4, np.float32), "b")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "ln-axis.onnx"))
