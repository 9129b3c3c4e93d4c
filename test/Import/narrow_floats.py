#!/usr/bin/python3
"""Builds a Gemm model whose input and initializers are FLOAT16 or BFLOAT16,
runs it with `fsdpc --forward-only` and `fsdp-run --forward`, and compares
with numpy in float64 from the same (exactly widened) values.

Usage: narrow_floats.py {float16,bfloat16} WORK_DIR. Needs /usr/bin/python3
(onnx, numpy), fsdpc and fsdp-run on PATH.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def bf16_bits(values):
    """float32 -> bfloat16 bits, rounding to nearest even (numpy has no bf16)."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def narrow(values, kind):
    """(raw bytes, the float64 values they hold)."""
    if kind == "float16":
        h = np.asarray(values, np.float16)
        return h.tobytes(), h.astype(np.float64)
    b = bf16_bits(values)
    return b.tobytes(), (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def main():
    kind, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    onnx_type = TensorProto.FLOAT16 if kind == "float16" else TensorProto.BFLOAT16
    rng = np.random.default_rng(3)
    w_raw, w = narrow(rng.standard_normal((4, 5)), kind)
    b_raw, b = narrow(rng.standard_normal(4), kind)
    x_raw, x = narrow(rng.standard_normal((3, 5)), kind)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="linear", transB=1)], "narrow",
        [helper.make_tensor_value_info("x", onnx_type, [3, 5])],
        [helper.make_tensor_value_info("y", onnx_type, [3, 4])],
        [helper.make_tensor("w", onnx_type, [4, 5], w_raw, raw=True),
         helper.make_tensor("b", onnx_type, [4], b_raw, raw=True)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = os.path.join(work, "model.onnx")
    onnx.save(model, path)

    inputs, outputs = os.path.join(work, "in"), os.path.join(work, "out")
    os.makedirs(inputs, exist_ok=True)
    os.makedirs(outputs, exist_ok=True)
    # float16 data as numpy writes it; bf16 data as the float32 it widens to.
    np.save(os.path.join(inputs, "x.npy"), x.astype(np.float16 if kind == "float16" else np.float32))
    plan = os.path.join(work, "plan.bin")
    for cmd in (["fsdpc", path, "--forward-only", "-o", plan],
                ["fsdp-run", plan, "--forward", "--inputs", inputs, "--outputs", outputs]):
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode:
            sys.exit("%s failed:\n%s%s" % (" ".join(cmd), result.stdout, result.stderr))
    got = np.load(os.path.join(outputs, "y.npy"))
    want = x @ w.T + b
    error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    print("%s Gemm: max-norm rel. error %.2e against float64" % (kind, error))
    print("RESULT:", "PASS" if got.dtype == np.float32 and error < 1e-6 else "FAIL")


if __name__ == "__main__":
    main()
