#!/usr/bin/python3
"""Builds models that select rows with a boolean mask as torch exports
`x[mask].view(B, -1, H)[:, j]` (NonZero, Transpose, GatherND, Reshape,
Gather), compiles each with `fsdpc --forward-only`, runs `fsdp-run
--forward`, and compares with numpy computing the same selection. Every
group of the mask holds two selected elements, so j = 0 and j = -1 differ.

  masked_row_selection.py WORK_DIR           the checks, one line each
  masked_row_selection.py WORK_DIR --model   only writes WORK_DIR/last.onnx

Needs /usr/bin/python3 (onnx, numpy), fsdpc and fsdp-run on PATH.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

EOS = 7


def chain(x, mask, shape_nodes, shape, j, mask_dtype=TensorProto.BOOL):
    """The nodes of the selection of x's rows by mask, regrouped by `shape`
    (a value computed by shape_nodes), the j-th of each group."""
    nodes = [helper.make_node("Equal", ["ids", "eos"], ["is_eos"], name="is_eos")]
    if mask_dtype != TensorProto.BOOL:  # TorchScript's Cast before NonZero
        nodes.append(helper.make_node("Cast", ["is_eos"], ["is_eos_cast"], name="cast", to=mask_dtype))
    nodes += shape_nodes + [
        helper.make_node("NonZero", [nodes[-1].output[0]], ["positions"], name="select/NonZero"),
        helper.make_node("Transpose", ["positions"], ["tuples"], name="select/Transpose", perm=[1, 0]),
        helper.make_node("GatherND", [x, "tuples"], ["rows"], name="select/GatherND"),
        helper.make_node("Constant", [], ["j"], name="select/j", value=helper.make_tensor("j", TensorProto.INT64, [], [j])),
        helper.make_node("Reshape", ["rows", shape], ["grouped"], name="select/Reshape"),
        helper.make_node("Gather", ["grouped", "j"], ["y"], name="select/Gather", axis=1),
    ]
    return nodes


def model(batch, ids_shape, x_shape, j, symbolic=False, mask_dtype=TensorProto.BOOL):
    hidden = x_shape[-1]
    init = [helper.make_tensor("eos", TensorProto.INT64, [], [EOS])]
    if symbolic:  # the batch read from x's shape, as a dynamic-axes export computes it
        shape_nodes = [
            helper.make_node("Shape", ["x"], ["x_shape"], name="shape"),
            helper.make_node("Constant", [], ["zero"], name="zero", value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
            helper.make_node("Gather", ["x_shape", "zero"], ["batch"], name="batch", axis=0),
            helper.make_node("Constant", [], ["axes"], name="axes", value=helper.make_tensor("a", TensorProto.INT64, [1], [0])),
            helper.make_node("Unsqueeze", ["batch", "axes"], ["batch_1"], name="batch_1"),
            helper.make_node("Constant", [], ["rest"], name="rest",
                             value=helper.make_tensor("r", TensorProto.INT64, [2], [-1, hidden])),
            helper.make_node("Concat", ["batch_1", "rest"], ["view"], name="view", axis=0),
        ]
        ids_shape, x_shape = ["batch"] + ids_shape[1:], ["batch"] + x_shape[1:]
    else:
        shape_nodes = [helper.make_node("Constant", [], ["view"], name="view",
                                        value=helper.make_tensor("v", TensorProto.INT64, [3], [batch, -1, hidden]))]
    graph = helper.make_graph(
        chain("x", "ids", shape_nodes, "view", j, mask_dtype), "masked_rows",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ids_shape),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x_shape[0], hidden])], init)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def ids_with_two_eos(rng, shape):
    """Token ids with EOS at two random places of every group (the batch)."""
    ids = rng.integers(0, EOS, shape)
    flat = ids.reshape(shape[0], -1)
    for row in flat:
        row[rng.choice(row.size, 2, replace=False)] = EOS
    return flat.reshape(shape)


def check(work, name, m, batch, ids_shape, x_shape, j, extra=()):
    rng = np.random.default_rng(len(name))
    ids = ids_with_two_eos(rng, [batch] + ids_shape[1:])
    x = rng.standard_normal([batch] + x_shape[1:]).astype(np.float32)
    want = x[ids == EOS].reshape(batch, -1, x_shape[-1])[:, j]
    path, plan = os.path.join(work, name + ".onnx"), os.path.join(work, name + ".plan")
    inputs, outputs = os.path.join(work, name + "-in"), os.path.join(work, name + "-out")
    os.makedirs(inputs, exist_ok=True)
    os.makedirs(outputs, exist_ok=True)
    onnx.save(m, path)
    np.save(os.path.join(inputs, "ids.npy"), ids)
    np.save(os.path.join(inputs, "x.npy"), x)
    for cmd in (["fsdpc", path, "--forward-only", "-o", plan, *extra],
                ["fsdp-run", plan, "--forward", "--inputs", inputs, "--outputs", outputs]):
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode:
            print("%s: FAIL: %s" % (name, (result.stderr.strip().splitlines() or ["?"])[-1]))
            return
    got = np.load(os.path.join(outputs, "y.npy"))
    ok = got.shape == want.shape and np.array_equal(got, want)
    print("%s: %s shape %s, max |fsdp-run - numpy| %s" % (
        name, "PASS" if ok else "FAIL", list(got.shape),
        "%.1e" % float(np.abs(got - want).max()) if got.shape == want.shape else "-"))


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    if sys.argv[2:] == ["--model"]:
        onnx.save(model(3, [3, 5], [3, 5, 4], -1), os.path.join(work, "last.onnx"))
        return
    for j in (-1, 0, 1, -2):
        check(work, "rows j=%d" % j, model(3, [3, 5], [3, 5, 4], j), 3, [3, 5], [3, 5, 4], j)
    # A 2-D mask per sample (x [B, T, U, H]): its elements in row-major order.
    check(work, "grid j=-1", model(2, [2, 3, 4], [2, 3, 4, 6], -1), 2, [2, 3, 4], [2, 3, 4, 6], -1)
    # TorchScript casts the mask to bool; a mask of integers selects nonzeros.
    check(work, "int64 mask j=0", model(3, [3, 5], [3, 5, 4], 0, mask_dtype=TensorProto.INT64), 3, [3, 5],
          [3, 5, 4], 0)
    # A static export of 3 samples compiled for 6: the literal shapes are
    # re-derived for the new batch.
    check(work, "rebatched j=-1", model(3, [3, 5], [3, 5, 4], -1), 6, [6, 5], [6, 5, 4], -1, ["--batch-size", "6"])
    # A symbolic batch, compiled for 6 samples.
    check(work, "symbolic j=-1", model(0, [None, 5], [None, 5, 4], -1, symbolic=True), 6, [6, 5], [6, 5, 4], -1,
          ["--batch-size", "6"])


if __name__ == "__main__":
    main()
