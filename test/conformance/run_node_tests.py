#!/usr/bin/python3
"""Runs ONNX's own node tests through fsdpc and fsdp-run, forward only.

For every test under DATA (default: libonnx-testdata's node tests) whose ops
fsdpc supports, it compiles `model.onnx` with `fsdpc --forward-only`, feeds
`test_data_set_0/input_*.pb` to `fsdp-run --forward`, and compares every
output with `output_*.pb` (rtol 1e-4, atol 1e-5, same shape).

fsdpc compiles static shapes, and many node tests pass shape operands (axes,
starts, ends, split sizes, a Reshape target, a dropout ratio) as graph
inputs. So scalar inputs are baked into the model as initializers with the
test's values before compiling, as a model exported with those values would
hold them, and so are Resize's roi and scales; other float inputs stay
runtime inputs. Integer (and bool) tensors are first given at run time, as
token ids and positions are; where fsdpc cannot compile the test so (a
shape operand must be a constant), they are baked in too and the test is
compiled again. The summary says how many passed with integers at run time.
Tests that use
an op fsdpc does not support are skipped; so are the tests in skip.txt, each
listed there with its reason. It ends with `N passed, N failed, N skipped`
and fails if any test failed.

Needs /usr/bin/python3 (onnx, numpy) and fsdpc, fsdp-run on PATH.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"


def supported_ops():
    listing = subprocess.run(["fsdpc", "--list-ops"], capture_output=True, text=True, check=True).stdout
    ops = {}
    for line in listing.split("\n"):
        if line.strip():
            op, since = line.split()[:2]  # then, after " -- ", what the pattern does not cover
            ops[op] = min(int(since), ops.get(op, 10**9))
    return ops


def read_skip_list(path):
    skips = {}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, reason = line.partition(" ")
            skips[name] = reason.strip() or "no reason given"
    return skips


def has_integer_tensor_input(model):
    """Whether a graph input (not an initializer) is an integer or bool
    tensor of rank 1 or more."""
    initializers = {i.name for i in model.graph.initializer}
    return any(i.name not in initializers and i.type.tensor_type.shape.dim and
               i.type.tensor_type.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.BOOL)
               for i in model.graph.input)


def run_test(test_dir, work, rtol, atol, runtime_integers):
    """None if it passed, else a one-line reason; with `runtime_integers`,
    integer tensors are runtime inputs, else initializers."""
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    data_dir = os.path.join(test_dir, "test_data_set_0")
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    values = []
    for index, info in enumerate(inputs):
        tensor = onnx.TensorProto()
        with open(os.path.join(data_dir, "input_%d.pb" % index), "rb") as f:
            tensor.ParseFromString(f.read())
        values.append(numpy_helper.to_array(tensor))
    # Float settings a torch export holds as constants: Resize's roi and
    # scales, Upsample's scales, OneHot's depth and values.
    settings = set()
    for node in model.graph.node:
        if node.op_type in ("Resize", "Upsample"):
            settings.update(node.input[1:3 if node.op_type == "Resize" else 2])
        if node.op_type == "OneHot":
            settings.update(node.input[1:3])
    runtime_inputs = []
    for info, value in zip(inputs, values):
        integer = info.type.tensor_type.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.BOOL)
        if (integer and not runtime_integers) or value.ndim == 0 or info.name in settings:
            model.graph.initializer.append(numpy_helper.from_array(value, info.name))
            if model.ir_version >= 4:  # before IR 4, initializers must also be graph inputs
                model.graph.input.remove(info)
        else:
            runtime_inputs.append((info, value))
    model_path = os.path.join(work, "model.onnx")
    onnx.save(model, model_path)
    plan = os.path.join(work, "plan.bin")
    compiled = subprocess.run(["fsdpc", model_path, "--forward-only", "-o", plan], capture_output=True, text=True)
    if compiled.returncode != 0:
        return "fsdpc: " + compiled.stderr.strip().split("\n")[-1]
    in_dir, out_dir = os.path.join(work, "in"), os.path.join(work, "out")
    os.makedirs(in_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    for info, value in runtime_inputs:
        array = value.astype(np.float32) if value.dtype.kind == "f" else value.astype(np.int64)
        np.save(os.path.join(in_dir, info.name + ".npy"), array)
    ran = subprocess.run(["fsdp-run", plan, "--forward", "--inputs", in_dir, "--outputs", out_dir],
                         capture_output=True, text=True)
    if ran.returncode != 0:
        return "fsdp-run: " + ran.stderr.strip().split("\n")[-1]
    for index, info in enumerate(model.graph.output):
        tensor = onnx.TensorProto()
        with open(os.path.join(data_dir, "output_%d.pb" % index), "rb") as f:
            tensor.ParseFromString(f.read())
        want = numpy_helper.to_array(tensor)
        got = np.load(os.path.join(out_dir, info.name + ".npy"))
        if got.shape != want.shape:
            return "output %s: shape %s, expected %s" % (info.name, got.shape, want.shape)
        if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol):
            worst = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))
            return "output %s: differs by up to %.3g" % (info.name, worst)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--skip-list", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "skip.txt"))
    parser.add_argument("--filter", default="", help="only tests whose name contains this")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--verbose", action="store_true", help="also list passed and skipped tests")
    parser.add_argument("--min-passed", type=int, default=0,
                        help="fail unless at least this many tests pass (a floor against lost coverage)")
    args = parser.parse_args()

    ops = supported_ops()
    skips = read_skip_list(args.skip_list)
    passed, failed, skipped = [], [], []
    runtime_integer_passes = 0
    with tempfile.TemporaryDirectory() as work:
        for name in sorted(os.listdir(args.data)):
            if args.filter not in name:
                continue
            test_dir = os.path.join(args.data, name)
            if not os.path.exists(os.path.join(test_dir, "model.onnx")):
                continue
            model = onnx.load(os.path.join(test_dir, "model.onnx"))
            unsupported = sorted({n.op_type for n in model.graph.node
                                  if n.domain not in ("", "ai.onnx") or n.op_type not in ops})
            if unsupported:
                skipped.append((name, "unsupported op " + ",".join(unsupported)))
                continue
            if name in skips:
                skipped.append((name, skips[name]))
                continue
            integers = has_integer_tensor_input(model)
            reason = run_test(test_dir, work, args.rtol, args.atol, runtime_integers=True)
            runtime_integer_passes += integers and reason is None
            if integers and reason is not None and reason.startswith("fsdpc:"):
                reason = run_test(test_dir, work, args.rtol, args.atol, runtime_integers=False)
                reason = reason and reason + " (integer inputs baked in)"
            (failed if reason else passed).append((name, reason))
    for name, reason in failed:
        print("FAILED  %s: %s" % (name, reason))
    if args.verbose:
        for name, _ in passed:
            print("passed  %s" % name)
        for name, reason in skipped:
            print("skipped %s: %s" % (name, reason))
    listed = sum(1 for _, reason in skipped if not reason.startswith("unsupported op"))
    print("ONNX node tests: %d passed, %d failed, %d skipped (%d for unsupported ops, %d in skip.txt); "
          "%d passed with integer tensors given at run time"
          % (len(passed), len(failed), len(skipped), len(skipped) - listed, listed, runtime_integer_passes))
    stale = sorted(set(skips) - {name for name, _ in skipped})
    for name in stale:
        print("note: skip.txt lists %s, which is not a test of a supported op here" % name)
    if len(passed) < args.min_passed:
        print("FAILED  only %d tests passed, fewer than --min-passed %d" % (len(passed), args.min_passed))
    sys.exit(1 if failed or len(passed) < args.min_passed else 0)


if __name__ == "__main__":
    main()
