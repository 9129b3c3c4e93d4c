#!/usr/bin/python3
"""Checks fsdpc's gradient rules against torch autograd, op by op.

Each case is a one-op ONNX model on parameters of odd sizes:

    loss = sum(op(P1, P2, ...) * W)

with a fixed random weight W, so every output element gets its own
gradient. fsdpc trains it for one SGD step at lr = 1000 (no momentum, no
weight decay) and saves the parameters; the gradient it used is
(P_before - P_after) / 1000. torch computes the same loss on the same values
and differentiates it with autograd. Each parameter's gradient must agree
within --rtol in the 2-norm (and the forward loss with it). The loss is a
sum of terms of both signs that can cancel to far below their size, so its
error is measured against the sum of the terms' magnitudes, sum |op(..) * W|:
the 2-norm-style relative error of the terms, which cancellation cannot
inflate.

Needs /usr/bin/python3 (torch, onnx, numpy) and fsdpc, fsdp-run on PATH.
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

from torch_reference import HEADROOM, norm_rel, read_losses, read_safetensors, run

LR = 1000.0


def case(name, op, params, attrs=None, torch_fn=None, constants=None, constants_first=False, outputs=1, take=0,
         opset=13, nodes=None):
    """`constants` are extra integer (or bool) inputs after the parameters, or
    before them with `constants_first`; `take` picks one of `outputs`. With
    `nodes` (a list of ONNX nodes computing "y" from the parameters and the
    constants, named "const.NAME"), the case is that subgraph instead of one op."""
    return {"name": name, "op": op, "params": params, "attrs": attrs or {}, "torch": torch_fn,
            "constants": constants or {}, "constants_first": constants_first, "outputs": outputs, "take": take,
            "opset": opset, "nodes": nodes}


def scalar(value):
    return np.array(value, np.float32)


# Attention's causal mask on [5, 7] scores: True where a position is hidden.
CAUSAL = np.triu(np.ones((5, 7), bool), k=1)
CAUSAL5 = np.triu(np.ones((5, 5), dtype=bool), 1)  # True above the diagonal: masked


# BatchNormalization's running statistics in inference mode.
BN_MEAN = np.linspace(-0.5, 0.5, 5).astype(np.float32)
BN_VAR = np.linspace(0.5, 2.0, 5).astype(np.float32)


def layer_norm_formula(axes):
    """LayerNorm as torch exports it at opset 13 (ReduceMean/Sub/Pow/Add/Sqrt/Div, then scale and bias)."""
    node = helper.make_node
    return [node("ReduceMean", ["x"], ["mean"], axes=axes), node("Sub", ["x", "mean"], ["centered"]),
            node("Pow", ["centered", "const.two"], ["squared"]),
            node("ReduceMean", ["squared"], ["variance"], axes=axes),
            node("Add", ["variance", "const.eps"], ["shifted"]), node("Sqrt", ["shifted"], ["deviation"]),
            node("Div", ["centered", "deviation"], ["normalized"]), node("Mul", ["normalized", "scale"], ["scaled"]),
            node("Add", ["scaled", "bias"], ["y"])]


def gelu_erf_formula():
    """GELU as torch 1.13 exports F.gelu: x * (1 + erf(x / sqrt(2))) * 0.5."""
    node = helper.make_node
    return [node("Div", ["x", "const.sqrt2"], ["scaled"]), node("Erf", ["scaled"], ["erf"]),
            node("Add", ["erf", "const.one"], ["shifted"]), node("Mul", ["x", "shifted"], ["product"]),
            node("Mul", ["product", "const.half"], ["y"])]


def gelu_tanh_formula():
    """GELU as torch 1.13 exports F.gelu(approximate='tanh')."""
    node = helper.make_node
    return [node("Mul", ["x", "x"], ["square"]), node("Mul", ["x", "square"], ["cube"]),
            node("Mul", ["const.cubic", "cube"], ["term"]), node("Add", ["x", "term"], ["inner"]),
            node("Mul", ["const.k", "inner"], ["scaled"]), node("Tanh", ["scaled"], ["tanh"]),
            node("Add", ["const.one", "tanh"], ["shifted"]), node("Mul", ["x", "shifted"], ["product"]),
            node("Mul", ["const.half", "product"], ["y"])]


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape).astype(np.float32)


def normal(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def wide(rng, shape):
    return (3 * rng.standard_normal(shape)).astype(np.float32)


def inside_unit(rng, shape):
    """In (-0.9, 0.9): the domain of asin, acos and atanh, away from its poles."""
    return rng.uniform(-0.9, 0.9, shape).astype(np.float32)


def grid_points(rng, shape):
    """Normalised sampling positions, some past the image's edges."""
    return rng.uniform(-1.3, 1.3, shape).astype(np.float32)


def far_grid_points(rng, shape):
    """Positions up to two image widths out, reflected more than once."""
    return rng.uniform(-2.6, 2.6, shape).astype(np.float32)


def above_one(rng, shape):
    return rng.uniform(1.2, 4.0, shape).astype(np.float32)


def away_from_zero(rng, shape):
    """Divisors: magnitudes in [0.5, 2], either sign."""
    return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(np.float32)

# Labels and class weights for the losses: some labels equal ignore_index.
LOSS_RNG = np.random.default_rng(7)
NLL_TARGET_4D = LOSS_RNG.integers(0, 5, (3, 4, 2)).astype(np.int64)
NLL_TARGET_2D = LOSS_RNG.integers(0, 5, (7,)).astype(np.int64)
NLL_TARGET_3D = LOSS_RNG.integers(0, 6, (4, 3)).astype(np.int64)
SCE_TARGET = np.array([0, 3, -1, 4, 1, -1, 2], np.int64)
CLASS_WEIGHT5 = np.linspace(0.5, 2.0, 5).astype(np.float32)
CLASS_WEIGHT6 = np.linspace(2.0, 0.25, 6).astype(np.float32)
GATHER_INDEX = LOSS_RNG.integers(0, 7, (3, 3, 5)).astype(np.int64)


# One zero in the first of ReduceProd's rows (the rest ones); OneHot's labels,
# two of them negative (counted from the end).
PROD_ZERO = np.ones((3, 5, 7), np.float32)
PROD_ZERO[0, 2, 3] = 0.0
ONE_HOT_LABELS = np.array([0, 5, -1, -4], np.int64)
# ScatterElements' indices: distinct per row (one negative) for reduction
# none; repeated for add.
SCATTER_INDEX = np.array([[0, 3], [4, -2], [-5, 2]], np.int64)
SCATTER_ADD_INDEX = np.array([[0, 1, 2], [3, 3, 0], [1, 0, 1], [0, 2, 2], [3, 1, 0], [2, 2, 3]], np.int64)


def torch_gates(onnx_rows, order):
    """Rows of an ONNX recurrent weight [G H, ...] in torch's gate order:
    `order` lists the ONNX gate index of each torch gate."""
    hidden = onnx_rows.shape[0] // len(order)
    return torch.cat([onnx_rows[g * hidden:(g + 1) * hidden] for g in order])


# torch's LSTM gates are i f g o, ONNX's i o f c; torch's GRU r z n,
# ONNX's z r h.
LSTM_ORDER, GRU_ORDER = [0, 2, 3, 1], [1, 0, 2]


def torch_recurrent(kind, x, w, r, b, order, batch_first=False):
    """torch's LSTM / GRU / RNN kernels (what nn.LSTM, nn.GRU and nn.RNN
    call) run with ONNX-layout weights (directions first, biases as [W's,
    R's]), differentiable in them. kind: lstm, gru, rnn_tanh or rnn_relu."""
    directions, rows, _ = w.shape
    hidden = r.shape[2]
    flat = []
    for d in range(directions):
        flat += [torch_gates(w[d], order), torch_gates(r[d], order), torch_gates(b[d, :rows], order),
                 torch_gates(b[d, rows:], order)]
    batch = x.shape[0 if batch_first else 1]
    h0 = torch.zeros(directions, batch, hidden, dtype=x.dtype)
    state = (h0, h0) if kind == "lstm" else h0
    return getattr(torch._VF, kind)(x, state, flat, True, 1, 0.0, False, directions == 2, batch_first)


def gru_reset_before(x, w, r, b):
    """ONNX's GRU with linear_before_reset 0, one direction, by its
    equations: torch has no such module."""
    hidden = r.shape[2]
    wz, wr, wh = w[0].split(hidden)
    rz, rr, rh = r[0].split(hidden)
    wbz, wbr, wbh, rbz, rbr, rbh = b[0].split(hidden)
    h = torch.zeros(x.shape[1], hidden, dtype=x.dtype)
    ys = []
    for xt in x:
        z = torch.sigmoid(xt @ wz.T + h @ rz.T + wbz + rbz)
        rt = torch.sigmoid(xt @ wr.T + h @ rr.T + wbr + rbr)
        candidate = torch.tanh(xt @ wh.T + (rt * h) @ rh.T + rbh + wbh)
        h = (1 - z) * candidate + z * h
        ys.append(h)
    return torch.stack(ys).unsqueeze(1)


def labels(array):
    return torch.tensor(array)


def weights(array, like):
    return torch.tensor(array, dtype=like.dtype)


def packed_attention_reference(qkv, heads, scale):
    """torch's attention on the thirds of a fused projection, heads side by side."""
    b, t, c = qkv.shape
    q, k, v = (part.reshape(b, t, heads, c // 3 // heads).transpose(1, 2) for part in qkv.split(c // 3, dim=2))
    p = torch.softmax((q @ k.transpose(-2, -1) * scale).masked_fill(torch.tensor(CAUSAL5), float("-inf")), -1)
    return (p @ v).transpose(1, 2).reshape(b, t, c // 3)


def sink_attention_reference(q, k, v, sinks, scale):
    """GPT-OSS's eager attention: each head's sink a last column of the
    scores, the rows' maximum subtracted, the softmax, the sink's column
    dropped."""
    scores = (q @ k.transpose(-2, -1) * scale).masked_fill(torch.tensor(CAUSAL5), float("-inf"))
    column = sinks.reshape(1, -1, 1, 1).expand(scores.shape[0], -1, scores.shape[2], 1)
    logits = torch.cat([scores, column], -1)
    logits = logits - logits.max(-1, keepdim=True).values
    return torch.softmax(logits, -1)[..., :-1] @ v


def cases():
    """(name, ONNX op, {param: (shape, sampler)}, attributes, torch function of the params in order)."""
    return [
        case("gemm_transB_bias", "Gemm", {"a": ((5, 7), normal), "b": ((3, 7), normal), "c": ((3,), normal)},
             {"transB": 1, "alpha": 0.5, "beta": 2.0}, lambda a, b, c: 0.5 * a @ b.t() + 2.0 * c),
        case("matmul_2d", "MatMul", {"a": ((5, 7), normal), "b": ((7, 3), normal)}, {}, lambda a, b: a @ b),
        case("matmul_3d_by_2d", "MatMul", {"a": ((3, 5, 7), normal), "b": ((7, 3), normal)}, {}, lambda a, b: a @ b),
        case("matmul_batched_broadcast", "MatMul", {"a": ((3, 1, 5, 7), normal), "b": ((2, 7, 3), normal)}, {},
             lambda a, b: a @ b),
        case("matmul_vector_matrix", "MatMul", {"a": ((7,), normal), "b": ((3, 7, 5), normal)}, {},
             lambda a, b: a @ b),
        case("add_broadcast", "Add", {"a": ((3, 5, 7), normal), "b": ((5, 1), normal)}, {}, lambda a, b: a + b),
        case("sub_broadcast", "Sub", {"a": ((5, 1), normal), "b": ((3, 5, 7), normal)}, {}, lambda a, b: a - b),
        case("mul_broadcast", "Mul", {"a": ((3, 5, 7), normal), "b": ((7,), normal)}, {}, lambda a, b: a * b),
        case("div_broadcast", "Div", {"a": ((3, 5, 7), normal), "b": ((3, 1, 7), positive)}, {}, lambda a, b: a / b),
        case("pow", "Pow", {"a": ((5, 7), positive), "b": ((7,), normal)}, {}, lambda a, b: torch.pow(a, b)),
        case("exp", "Exp", {"x": ((5, 7), normal)}, {}, torch.exp),
        case("log", "Log", {"x": ((5, 7), positive)}, {}, torch.log),
        case("sqrt", "Sqrt", {"x": ((5, 7), positive)}, {}, torch.sqrt),
        case("erf", "Erf", {"x": ((5, 7), normal)}, {}, torch.erf),
        case("reciprocal", "Reciprocal", {"x": ((5, 7), positive)}, {}, torch.reciprocal),
        case("neg", "Neg", {"x": ((5, 7), normal)}, {}, torch.neg),
        case("relu", "Relu", {"x": ((5, 7), normal)}, {}, torch.relu),
        case("tanh", "Tanh", {"x": ((5, 7), normal)}, {}, torch.tanh),
        case("sigmoid", "Sigmoid", {"x": ((5, 7), normal)}, {}, torch.sigmoid),
        case("softmax_axis1", "Softmax", {"x": ((3, 5, 7), normal)}, {"axis": 1},
             lambda x: torch.softmax(x, 1)),
        case("log_softmax_last", "LogSoftmax", {"x": ((3, 5, 7), normal)}, {"axis": -1},
             lambda x: torch.log_softmax(x, -1)),
        case("transpose", "Transpose", {"x": ((3, 5, 7), normal)}, {"perm": [2, 0, 1]},
             lambda x: x.permute(2, 0, 1)),
        case("flatten", "Flatten", {"x": ((3, 5, 7), normal)}, {"axis": 2}, lambda x: x.reshape(15, 7)),
        case("reduce_sum_keepdims", "ReduceSum", {"x": ((3, 5, 7), normal)}, {"keepdims": 1},
             lambda x: x.sum(dim=(0, 2), keepdim=True), constants={"axes": np.array([0, 2], np.int64)}),
        case("reduce_mean_last", "ReduceMean", {"x": ((3, 5, 7), normal)}, {"axes": [-1], "keepdims": 0},
             lambda x: x.mean(dim=-1)),
        case("expand", "Expand", {"x": ((5, 1), normal)}, {}, lambda x: x.expand(3, 5, 7),
             constants={"shape": np.array([3, 5, 7], np.int64)}),
        case("concat_axis1", "Concat", {"a": ((3, 2, 7), normal), "b": ((3, 5, 7), normal)}, {"axis": 1},
             lambda a, b: torch.cat([a, b], 1)),
        case("slice_steps", "Slice", {"x": ((5, 9), normal)}, {}, lambda x: x[1:5][:, [7, 4, 1]],
             constants={"starts": np.array([1, 7], np.int64), "ends": np.array([5, 0], np.int64),
                        "axes": np.array([0, 1], np.int64), "steps": np.array([1, -3], np.int64)}),
        case("split_uneven", "Split", {"x": ((3, 7), normal)}, {"axis": 1}, lambda x: x[:, 2:7] * 1.0,
             constants={"split": np.array([2, 5], np.int64)}, outputs=2, take=1),
        case("gather_embedding", "Gather", {"table": ((11, 5), normal)}, {"axis": 0},
             lambda t: t[torch.tensor([[3, 0, 3], [10, 7, 3]])],
             constants={"ids": np.array([[3, 0, 3], [10, 7, 3]], np.int64)}),
        case("where_mask", "Where", {"a": ((3, 5, 5), normal), "b": ((1,), normal)}, {},
             lambda a, b: torch.where(torch.tensor(np.tril(np.ones((5, 5), bool))), a, b),
             constants={"mask": np.tril(np.ones((5, 5), bool))}, constants_first=True),
        case("unsqueeze_squeeze", "Unsqueeze", {"x": ((3, 5), normal)}, {}, lambda x: x.unsqueeze(1),
             constants={"axes": np.array([1], np.int64)}),
        case("trilu_lower_k1", "Trilu", {"x": ((3, 5, 7), normal)}, {"upper": 0}, lambda x: torch.tril(x, 1),
             constants={"k": np.array(1, np.int64)}, opset=14),
        case("layer_norm_opset17", "LayerNormalization", {"x": ((3, 5, 7), normal), "scale": ((7,), normal),
             "bias": ((7,), normal)}, {"axis": -1, "epsilon": 1e-5},
             lambda x, s, b: F.layer_norm(x, (7,), s, b, 1e-5), opset=17),
        case("layer_norm_opset17_2d_nobias", "LayerNormalization", {"x": ((3, 5, 7), normal),
             "scale": ((5, 7), normal)}, {"axis": 1, "epsilon": 1e-3},
             lambda x, s: F.layer_norm(x, (5, 7), s, None, 1e-3), opset=17),
        # Versions newer than libonnx 1.12 knows (fsdpc registers their schemas).
        case("gelu_opset20", "Gelu", {"x": ((5, 7), normal)}, {}, F.gelu, opset=20),
        case("gelu_opset20_tanh", "Gelu", {"x": ((5, 7), normal)}, {"approximate": "tanh"},
             lambda x: F.gelu(x, approximate="tanh"), opset=20),
        case("reduce_mean_opset18_axes_input", "ReduceMean", {"x": ((3, 5, 7), normal)}, {"keepdims": 0},
             lambda x: x.mean(dim=(0, 2)), constants={"axes": np.array([0, -1], np.int64)}, opset=18),
        case("split_opset18_num_outputs", "Split", {"x": ((3, 7), normal)}, {"axis": 1, "num_outputs": 3},
             lambda x: x[:, 6:7] * 1.0, outputs=3, take=2, opset=18),
        # The formulas opset-13 exports write; graph-fuse must turn each into the named op.
        case("layer_norm_formula_2d", "graph.layer_norm", {"x": ((3, 5, 7), normal), "scale": ((5, 7), normal),
             "bias": ((5, 7), normal)}, {}, lambda x, s, b: F.layer_norm(x, (5, 7), s, b, 1e-5),
             constants={"two": scalar(2.0), "eps": scalar(1e-5)}, nodes=layer_norm_formula([-2, -1])),
        case("gelu_erf_formula", "graph.gelu", {"x": ((5, 7), normal)}, {}, F.gelu,
             constants={"sqrt2": scalar(math.sqrt(2)), "one": scalar(1.0), "half": scalar(0.5)},
             nodes=gelu_erf_formula()),
        case("masked_softmax_formula", "graph.masked_softmax", {"x": ((3, 5, 7), normal)}, {},
             lambda x: torch.softmax((x * 0.3).masked_fill(torch.tensor(CAUSAL), float("-inf")), -1),
             constants={"scale": scalar(0.3), "ninf": scalar(-np.inf), "mask": CAUSAL},
             nodes=[helper.make_node("Mul", ["x", "const.scale"], ["scaled"]),
                    helper.make_node("Where", ["const.mask", "const.ninf", "scaled"], ["masked"]),
                    helper.make_node("Softmax", ["masked"], ["y"], axis=-1)]),
        case("rms_norm_formula", "graph.rms_norm", {"x": ((3, 5, 7), normal), "scale": ((7,), normal)}, {},
             lambda x, w: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
             constants={"two": scalar(2.0), "eps": scalar(1e-6)},
             nodes=[helper.make_node("Pow", ["x", "const.two"], ["squared"]),
                    helper.make_node("ReduceMean", ["squared"], ["mean"], axes=[-1]),
                    helper.make_node("Add", ["mean", "const.eps"], ["shifted"]),
                    helper.make_node("Sqrt", ["shifted"], ["rms"]), helper.make_node("Div", ["x", "rms"], ["normalized"]),
                    helper.make_node("Mul", ["normalized", "scale"], ["y"])]),
        case("additive_mask_softmax_formula", "graph.masked_softmax", {"x": ((3, 5, 7), normal)}, {},
             lambda x: torch.softmax(x / 2.5 + torch.tensor(np.where(CAUSAL, -np.inf, 0.0)), -1),
             constants={"c": scalar(2.5), "bias": np.where(CAUSAL, -np.inf, 0.0).astype(np.float32)},
             nodes=[helper.make_node("Div", ["x", "const.c"], ["scaled"]),
                    helper.make_node("Add", ["scaled", "const.bias"], ["masked"]),
                    helper.make_node("Softmax", ["masked"], ["y"], axis=-1)]),
        # Attention as GPT-2 exports write it (q @ k^T with k^T given, scale,
        # causal Where, softmax, @ v): graph-fuse makes one graph.attention.
        case("attention_formula", "graph.attention",
             {"q": ((2, 3, 5, 4), normal), "kt": ((2, 3, 4, 5), normal), "v": ((2, 3, 5, 6), normal)}, {},
             lambda q, kt, v: torch.softmax((q @ kt * 0.45).masked_fill(torch.tensor(CAUSAL5), float("-inf")), -1) @ v,
             constants={"scale": scalar(0.45), "ninf": scalar(-np.inf), "mask": CAUSAL5},
             nodes=[helper.make_node("MatMul", ["q", "kt"], ["scores"]),
                    helper.make_node("Mul", ["scores", "const.scale"], ["scaled"]),
                    helper.make_node("Where", ["const.mask", "const.ninf", "scaled"], ["masked"]),
                    helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
                    helper.make_node("MatMul", ["p", "v"], ["y"])]),
        # Attention over one fused projection as GPT-2 exports it (Split in
        # three, Reshape to heads, Transpose the heads forward, the key in one
        # step to [B, H, D, T], and the output back): graph-fuse makes one
        # graph.packed_attention, whose one gradient is the projection's.
        case("packed_attention_formula", "graph.packed_attention", {"qkv": ((2, 5, 18), normal)}, {},
             lambda qkv: packed_attention_reference(qkv, heads=2, scale=0.45),
             constants={"split": np.array([6, 6, 6], np.int64), "heads": np.array([2, 5, 2, 3], np.int64),
                        "merged": np.array([2, 5, 6], np.int64), "scale": scalar(0.45), "ninf": scalar(-np.inf),
                        "mask": CAUSAL5},
             nodes=[helper.make_node("Split", ["qkv", "const.split"], ["q0", "k0", "v0"], axis=2),
                    helper.make_node("Reshape", ["q0", "const.heads"], ["q1"]),
                    helper.make_node("Reshape", ["k0", "const.heads"], ["k1"]),
                    helper.make_node("Reshape", ["v0", "const.heads"], ["v1"]),
                    helper.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
                    helper.make_node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
                    helper.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
                    helper.make_node("MatMul", ["q", "kt"], ["scores"]),
                    helper.make_node("Mul", ["scores", "const.scale"], ["scaled"]),
                    helper.make_node("Where", ["const.mask", "const.ninf", "scaled"], ["masked"]),
                    helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
                    helper.make_node("MatMul", ["p", "v"], ["o"]),
                    helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
                    helper.make_node("Reshape", ["ot", "const.merged"], ["y"])]),
        # Attention with sinks as GPT-OSS's eager attention writes it:
        # graph-fuse makes one graph.attention with sinks, whose gradient
        # rule gives the sinks theirs (sinks of both signs and of the scores'
        # size, so that each takes a share of its rows).
        case("attention_with_sinks_formula", "graph.attention",
             {"q": ((2, 3, 5, 4), normal), "k": ((2, 3, 5, 4), normal), "v": ((2, 3, 5, 6), normal),
              "sinks": ((3,), normal)}, {},
             lambda q, k, v, sinks: sink_attention_reference(q, k, v, sinks, scale=0.45),
             constants={"scale": scalar(0.45), "bias": np.where(CAUSAL5, -np.inf, 0.0).astype(np.float32),
                        "per_head": np.array([1, 3, 1, 1], np.int64), "column": np.array([2, 3, 5, 1], np.int64),
                        "zero": np.array([0], np.int64), "keys": np.array([5], np.int64),
                        "last": np.array([-1], np.int64)},
             nodes=[helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                    helper.make_node("MatMul", ["q", "kt"], ["scores"]),
                    helper.make_node("Mul", ["scores", "const.scale"], ["scaled"]),
                    helper.make_node("Add", ["scaled", "const.bias"], ["masked"]),
                    helper.make_node("Reshape", ["sinks", "const.per_head"], ["sinks4"]),
                    helper.make_node("Expand", ["sinks4", "const.column"], ["sink_column"]),
                    helper.make_node("Concat", ["masked", "sink_column"], ["logits"], axis=-1),
                    helper.make_node("ReduceMax", ["logits"], ["row_max"], axes=[-1], keepdims=1),
                    helper.make_node("Sub", ["logits", "row_max"], ["shifted"]),
                    helper.make_node("Softmax", ["shifted"], ["p"], axis=-1),
                    helper.make_node("Slice", ["p", "const.zero", "const.keys", "const.last"], ["p_keys"]),
                    helper.make_node("MatMul", ["p_keys", "v"], ["y"])]),
        # A mixture of experts' projection as transformers' batched_mm
        # experts export it (each row's expert's matrix gathered, then a
        # batched product): graph-fuse makes one graph.expert_matmul; expert
        # 1 has no row, expert 2 is named as -1.
        case("expert_matmul_formula", "graph.expert_matmul",
             {"x": ((6, 2, 5), normal), "w": ((3, 5, 4), normal)}, {},
             lambda x, w: x @ w[torch.tensor([2, 0, 2, 0, 0, 2])],
             constants={"experts": np.array([2, 0, -1, 0, 0, 2], np.int64)},
             nodes=[helper.make_node("Gather", ["w", "const.experts"], ["gathered"], axis=0),
                    helper.make_node("MatMul", ["x", "gathered"], ["y"])]),
        case("gelu_tanh_formula", "graph.gelu", {"x": ((5, 7), normal)}, {}, lambda x: F.gelu(x, approximate="tanh"),
             constants={"cubic": scalar(0.044715), "k": scalar(math.sqrt(2 / math.pi)), "one": scalar(1.0),
                        "half": scalar(0.5)}, nodes=gelu_tanh_formula()),
        # The gated MLPs: SwiGLU as exports write silu(gate) * up, and GeGLU.
        case("swiglu_formula", "graph.gated_activation", {"gate": ((3, 5, 7), normal), "up": ((3, 5, 7), normal)}, {},
             lambda g, u: F.silu(g) * u,
             nodes=[helper.make_node("Sigmoid", ["gate"], ["s"]), helper.make_node("Mul", ["gate", "s"], ["silu"]),
                    helper.make_node("Mul", ["silu", "up"], ["y"])]),
        case("geglu_opset20_tanh", "graph.gated_activation", {"gate": ((5, 7), normal), "up": ((5, 7), normal)}, {},
             lambda g, u: F.gelu(g, approximate="tanh") * u, opset=20,
             nodes=[helper.make_node("Gelu", ["gate"], ["g"], approximate="tanh"),
                    helper.make_node("Mul", ["up", "g"], ["y"])]),
        # Ops fsdpc composes from graph primitives (CompositePatterns.cpp).
        case("leaky_relu", "LeakyRelu", {"x": ((5, 7), normal)}, {"alpha": 0.1},
             lambda x: F.leaky_relu(x, 0.1)),
        case("elu", "Elu", {"x": ((5, 7), normal)}, {"alpha": 0.7}, lambda x: F.elu(x, 0.7)),
        case("softplus", "Softplus", {"x": ((5, 7), normal)}, {}, F.softplus),
        case("mish_opset18", "Mish", {"x": ((5, 7), normal)}, {}, F.mish, opset=18),
        case("hard_sigmoid", "HardSigmoid", {"x": ((5, 7), normal)}, {"alpha": 1 / 6, "beta": 0.5},
             F.hardsigmoid),
        case("hard_swish", "HardSwish", {"x": ((5, 7), normal)}, {}, F.hardswish, opset=14),
        # Clip's bounds as Constant nodes, as torch writes them; it composes to relus.
        case("clip_min_max", "graph.relu", {"x": ((5, 7), normal)}, {}, lambda x: torch.clamp(x, -0.5, 0.8),
             constants={"lo": scalar(-0.5), "hi": scalar(0.8)},
             nodes=[helper.make_node("Clip", ["x", "const.lo", "const.hi"], ["y"])]),
        case("clip_min_only", "graph.relu", {"x": ((5, 7), normal)}, {}, lambda x: torch.clamp(x, min=0.2),
             constants={"lo": scalar(0.2)}, nodes=[helper.make_node("Clip", ["x", "const.lo"], ["y"])]),
        case("clip_opset10_max_attribute", "Clip", {"x": ((5, 7), normal)}, {"max": 0.3},
             lambda x: torch.clamp(x, max=0.3), opset=10),
        case("abs", "Abs", {"x": ((5, 7), normal)}, {}, torch.abs),
        case("max_broadcast", "Max", {"a": ((3, 5, 7), normal), "b": ((5, 1), normal)}, {},
             lambda a, b: torch.maximum(a, b)),
        case("min_three", "Min", {"a": ((5, 7), normal), "b": ((7,), normal), "c": ((5, 7), normal)}, {},
             lambda a, b, c: torch.minimum(torch.minimum(a, b), c)),
        case("global_average_pool", "GlobalAveragePool", {"x": ((3, 5, 4, 7), normal)}, {},
             lambda x: F.adaptive_avg_pool2d(x, 1)),
        case("tile", "Tile", {"x": ((3, 1, 5), normal)}, {}, lambda x: x.repeat(2, 3, 1),
             constants={"repeats": np.array([2, 3, 1], np.int64)}),
        case("cumsum_axis1", "CumSum", {"x": ((3, 5, 7), normal)}, {}, lambda x: torch.cumsum(x, 1),
             constants={"axis": np.array(1, np.int64)}),
        case("cumsum_exclusive_reverse_last", "CumSum", {"x": ((3, 7), normal)}, {"exclusive": 1, "reverse": 1},
             lambda x: torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1]) - x,
             constants={"axis": np.array(-1, np.int64)}),
        # Conv and pooling as gathered patches.
        case("conv2d_bias", "Conv", {"x": ((2, 3, 7, 6), normal), "w": ((5, 3, 3, 2), normal), "b": ((5,), normal)}, {},
             lambda x, w, b: F.conv2d(x, w, b)),
        case("conv2d_stride_pad_dilation", "Conv", {"x": ((2, 3, 9, 8), normal), "w": ((4, 3, 3, 3), normal)},
             {"strides": [2, 1], "pads": [1, 2, 0, 1], "dilations": [1, 2]},
             lambda x, w: F.conv2d(F.pad(x, (2, 1, 1, 0)), w, stride=(2, 1), dilation=(1, 2))),
        case("conv2d_groups", "Conv", {"x": ((2, 6, 5, 5), normal), "w": ((4, 3, 3, 3), normal), "b": ((4,), normal)},
             {"group": 2, "pads": [1, 1, 1, 1]}, lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2)),
        case("conv2d_depthwise", "Conv", {"x": ((2, 4, 6, 7), normal), "w": ((4, 1, 3, 3), normal)},
             {"group": 4, "strides": [2, 2], "auto_pad": "SAME_UPPER"},
             lambda x, w: F.conv2d(F.pad(x, (1, 1, 0, 1)), w, stride=2, groups=4)),
        case("conv1d", "Conv", {"x": ((3, 4, 11), normal), "w": ((5, 4, 3), normal), "b": ((5,), normal)},
             {"strides": [2], "pads": [1, 1]}, lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1)),
        # Einsum as diagonals, sums, transposes and batch matmuls.
        case("einsum_attention_scores", "Einsum", {"q": ((2, 3, 5, 4), normal), "k": ((2, 3, 7, 4), normal)},
             {"equation": "bhqd,bhkd->bhqk"}, lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k), opset=12),
        case("einsum_chain_implicit", "Einsum", {"a": ((3, 4), normal), "b": ((4, 5), normal), "c": ((5, 2), normal)},
             {"equation": "ij,jk,kl"}, lambda a, b, c: torch.einsum("ij,jk,kl", a, b, c), opset=12),
        case("einsum_diagonal_ellipsis", "Einsum", {"x": ((2, 3, 4, 4), normal)}, {"equation": "...ii->...i"},
             lambda x: torch.einsum("...ii->...i", x), opset=12),
        case("einsum_transposed_rhs", "Einsum", {"a": ((3, 4), normal), "b": ((5, 4), normal)},
             {"equation": "ij,kj->ik"}, lambda a, b: torch.einsum("ij,kj->ik", a, b), opset=12),
        case("einsum_sum_one_side", "Einsum", {"a": ((3, 4, 2), normal), "b": ((2, 5), normal)},
             {"equation": "ijk,kl->l"}, lambda a, b: torch.einsum("ijk,kl->l", a, b), opset=12),
        # GroupNormalization: opset 18 scales per group, opset 21 per channel.
        case("group_norm_opset21", "GroupNormalization", {"x": ((3, 6, 4, 5), normal), "scale": ((6,), normal),
             "bias": ((6,), normal)}, {"num_groups": 3, "epsilon": 1e-5},
             lambda x, s, b: F.group_norm(x, 3, s, b, eps=1e-5), opset=21),
        case("group_norm_opset18_per_group", "GroupNormalization", {"x": ((2, 8, 7), normal), "scale": ((4,), normal),
             "bias": ((4,), normal)}, {"num_groups": 4, "epsilon": 1e-3},
             lambda x, s, b: F.group_norm(x, 4, eps=1e-3) * s.repeat_interleave(2)[:, None]
             + b.repeat_interleave(2)[:, None], opset=18),
        # ConvTranspose as a matmul and the scatter of its patches.
        case("conv_transpose2d_stride_pad_outpad", "ConvTranspose",
             {"x": ((2, 4, 5, 4), normal), "w": ((4, 3, 3, 2), normal), "b": ((3,), normal)},
             {"strides": [2, 3], "pads": [1, 0, 1, 1], "output_padding": [1, 2]},
             # torch pads symmetrically: the extra end pad crops one more column.
             lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 0), output_padding=(1, 2))[..., :-1]),
        case("conv_transpose2d_groups_dilation", "ConvTranspose", {"x": ((2, 6, 4, 5), normal),
             "w": ((6, 2, 3, 3), normal)}, {"group": 3, "dilations": [2, 1], "pads": [1, 1, 1, 1]},
             lambda x, w: F.conv_transpose2d(x, w, groups=3, dilation=(2, 1), padding=1)),
        case("conv_transpose1d", "ConvTranspose", {"x": ((3, 4, 7), normal), "w": ((4, 5, 4), normal),
             "b": ((5,), normal)}, {"strides": [2], "pads": [1, 1]},
             lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1)),
        case("average_pool_pad_exclude", "AveragePool", {"x": ((2, 3, 7, 6), normal)},
             {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
             lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
        case("average_pool_pad_include", "AveragePool", {"x": ((2, 3, 7, 6), normal)},
             {"kernel_shape": [2, 3], "pads": [1, 0, 1, 0], "count_include_pad": 1},
             lambda x: F.avg_pool2d(x, (2, 3), 1, (1, 0), count_include_pad=True)),
        case("max_pool_stride_pad", "MaxPool", {"x": ((2, 3, 7, 6), normal)},
             {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, lambda x: F.max_pool2d(x, 3, 2, 1)),
        case("max_pool_ceil", "MaxPool", {"x": ((2, 3, 7, 6), normal)},
             {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
             lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True)),
        case("instance_norm", "InstanceNormalization", {"x": ((3, 5, 4, 7), normal), "scale": ((5,), normal),
             "bias": ((5,), normal)}, {"epsilon": 1e-5},
             lambda x, s, b: F.instance_norm(x, weight=s, bias=b, eps=1e-5)),
        # The reductions composed from primitives (odd sizes: the pairwise
        # max carries a leftover element at each level).
        case("reduce_max", "ReduceMax", {"x": ((3, 7, 5), normal)}, {"axes": [1], "keepdims": 0},
             lambda x: x.amax(1)),
        case("reduce_max_two_axes", "ReduceMax", {"x": ((3, 7, 5), normal)}, {"axes": [0, 2]},
             lambda x: x.amax((0, 2), keepdim=True)),
        case("reduce_min_all", "ReduceMin", {"x": ((3, 7, 5), normal)}, {"keepdims": 0}, lambda x: x.amin()),
        case("reduce_l1", "ReduceL1", {"x": ((3, 7, 5), normal)}, {"axes": [2]},
             lambda x: x.abs().sum(2, keepdim=True)),
        case("reduce_l2", "ReduceL2", {"x": ((3, 7, 5), normal)}, {"axes": [1], "keepdims": 0},
             lambda x: x.norm(dim=1)),
        case("reduce_sum_square", "ReduceSumSquare", {"x": ((3, 7, 5), normal)}, {"axes": [0, 1]},
             lambda x: (x * x).sum((0, 1), keepdim=True)),
        case("reduce_log_sum", "ReduceLogSum", {"x": ((3, 7, 5), positive)}, {"axes": [2], "keepdims": 0},
             lambda x: x.sum(2).log()),
        case("reduce_log_sum_exp", "ReduceLogSumExp", {"x": ((3, 7, 5), normal)}, {"axes": [1]},
             lambda x: torch.logsumexp(x, 1, keepdim=True)),
        case("reduce_max_opset18", "ReduceMax", {"x": ((3, 7, 5), normal)}, {"keepdims": 0},
             lambda x: x.amax(2), constants={"axes": np.array([-1], np.int64)}, opset=18),
        # BatchNormalization: in training mode (batch statistics; the running
        # statistics, initializers here, are buffers that get no gradient),
        # at opset 15 by training_mode and at opset 13 by its five outputs;
        # in inference mode with the running statistics.
        case("batch_norm_training", "BatchNormalization", {"x": ((6, 5, 4, 3), normal), "scale": ((5,), normal),
             "bias": ((5,), normal)}, {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 1},
             lambda x, s, b: F.batch_norm(x, None, None, s, b, training=True, eps=1e-5),
             constants={"mean": np.zeros(5, np.float32), "var": np.ones(5, np.float32)}, outputs=3, opset=15),
        case("batch_norm_training_opset13_2d", "BatchNormalization", {"x": ((7, 5), normal), "scale": ((5,), normal),
             "bias": ((5,), normal)}, {"epsilon": 1e-3},
             lambda x, s, b: F.batch_norm(x, None, None, s, b, training=True, eps=1e-3),
             constants={"mean": np.zeros(5, np.float32), "var": np.ones(5, np.float32)}, outputs=5),
        case("batch_norm_inference", "BatchNormalization", {"x": ((3, 5, 4, 3), normal), "scale": ((5,), normal),
             "bias": ((5,), normal)}, {"epsilon": 1e-5},
             lambda x, s, b: F.batch_norm(x, torch.tensor(BN_MEAN, dtype=x.dtype), torch.tensor(BN_VAR, dtype=x.dtype), s, b, training=False,
                                          eps=1e-5),
             constants={"mean": BN_MEAN, "var": BN_VAR}, opset=15),
        # ScatterND (constant indices into the first dimension, a duplicate for
        # add; into two dimensions for the overwrite): x.index_put.
        case("scatter_nd_overwrite_2d_index", "graph.gather_grad", {"x": ((4, 5, 3), normal), "u": ((2, 3), normal)},
             {}, lambda x, u: x.index_put((labels(np.array([3, 0])), labels(np.array([1, 4]))), u),
             constants={"indices": np.array([[3, 1], [0, 4]], np.int64)}, opset=13,
             nodes=[helper.make_node("ScatterND", ["x", "const.indices", "u"], ["y"])]),
        case("scatter_nd_add_duplicates", "graph.gather_grad", {"x": ((5, 4), normal), "u": ((3, 4), normal)},
             {"reduction": "add"}, lambda x, u: x.index_put((labels(np.array([1, 3, 1])),), u, accumulate=True),
             constants={"indices": np.array([[1], [3], [1]], np.int64)}, opset=16,
             nodes=[helper.make_node("ScatterND", ["x", "const.indices", "u"], ["y"], reduction="add")]),
        # Resize as gathers of 1, 2 or 4 taps per axis, against F.interpolate
        # as torch exports it (nearest: asymmetric and floor; bilinear and
        # bicubic without align_corners: pytorch_half_pixel).
        case("resize_nearest", "graph.gather", {"x": ((2, 3, 4, 5), normal)}, None,
             lambda x: F.interpolate(x, scale_factor=(2, 3), mode="nearest"),
             constants={"scales": np.array([1, 1, 2, 3], np.float32)},
             nodes=[helper.make_node("Resize", ["x", "", "const.scales"], ["y"], mode="nearest",
                                     coordinate_transformation_mode="asymmetric", nearest_mode="floor")]),
        case("resize_bilinear", "graph.gather", {"x": ((2, 3, 5, 4), normal)}, None,
             lambda x: F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=False),
             constants={"sizes": np.array([2, 3, 7, 9], np.int64)},
             nodes=[helper.make_node("Resize", ["x", "", "", "const.sizes"], ["y"], mode="linear",
                                     coordinate_transformation_mode="pytorch_half_pixel")]),
        case("resize_bilinear_align_corners", "graph.gather", {"x": ((2, 3, 5, 4), normal)}, None,
             lambda x: F.interpolate(x, size=(3, 7), mode="bilinear", align_corners=True),
             constants={"sizes": np.array([2, 3, 3, 7], np.int64)},
             nodes=[helper.make_node("Resize", ["x", "", "", "const.sizes"], ["y"], mode="linear",
                                     coordinate_transformation_mode="align_corners")]),
        case("resize_bicubic", "graph.gather", {"x": ((2, 2, 5, 6), normal)}, None,
             lambda x: F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False),
             constants={"scales": np.array([1, 1, 2, 2], np.float32)},
             nodes=[helper.make_node("Resize", ["x", "", "const.scales"], ["y"], mode="cubic", cubic_coeff_a=-0.75,
                                     coordinate_transformation_mode="pytorch_half_pixel")]),
        # LRN across channels (odd sizes, where torch's and ONNX's windows
        # agree): squares summed over channel slices, the power through
        # exp and log.
        case("lrn_size5", "LRN", {"x": ((2, 7, 4, 3), normal)}, {"size": 5, "alpha": 0.3, "beta": 0.75, "bias": 2.0},
             lambda x: F.local_response_norm(x, 5, alpha=0.3, beta=0.75, k=2.0)),
        case("lrn_size3_1d", "LRN", {"x": ((3, 6, 5), normal)}, {"size": 3, "alpha": 0.5, "beta": 0.6, "bias": 1.0},
             lambda x: F.local_response_norm(x, 3, alpha=0.5, beta=0.6, k=1.0)),
        # GridSample as 4 (bilinear) or 1 (nearest) gathers of runtime rows:
        # the gradient reaches the image through gather_grad and the grid
        # through the taps' weights.
        case("grid_sample_bilinear", "GridSample", {"x": ((2, 3, 5, 6), normal), "grid": ((2, 4, 7, 2), grid_points)},
             {"mode": "bilinear", "padding_mode": "zeros", "align_corners": 0},
             lambda x, g: F.grid_sample(x, g, mode="bilinear", padding_mode="zeros", align_corners=False), opset=16),
        case("grid_sample_border_aligned", "GridSample",
             {"x": ((2, 3, 5, 6), normal), "grid": ((2, 4, 7, 2), grid_points)},
             {"mode": "bilinear", "padding_mode": "border", "align_corners": 1},
             lambda x, g: F.grid_sample(x, g, mode="bilinear", padding_mode="border", align_corners=True), opset=16),
        case("grid_sample_reflection", "GridSample",
             {"x": ((1, 2, 4, 5), normal), "grid": ((1, 6, 5, 2), far_grid_points)},
             {"mode": "bilinear", "padding_mode": "reflection", "align_corners": 0},
             lambda x, g: F.grid_sample(x, g, mode="bilinear", padding_mode="reflection", align_corners=False),
             opset=16),
        case("grid_sample_nearest", "GridSample", {"x": ((2, 3, 5, 6), normal), "grid": ((2, 4, 7, 2), grid_points)},
             {"mode": "nearest", "padding_mode": "zeros", "align_corners": 0},
             lambda x, g: F.grid_sample(x, g, mode="nearest", padding_mode="zeros", align_corners=False), opset=16),
        # Losses with class weights, ignore_index and every reduction: a
        # one-hot mask picks the label's entry (log-probabilities for
        # NegativeLogLikelihoodLoss, logits for SoftmaxCrossEntropyLoss);
        # the class weights are buffers, not trained. GatherElements on
        # runtime data is the same mask along its axis (torch.gather).
        case("nll_loss_4d_weight_ii_mean", "NegativeLogLikelihoodLoss", {"x": ((3, 5, 4, 2), normal)},
             {"ignore_index": 2},
             lambda x: F.nll_loss(x, labels(NLL_TARGET_4D), weight=weights(CLASS_WEIGHT5, x), ignore_index=2),
             constants={"target": NLL_TARGET_4D, "weight": CLASS_WEIGHT5}),
        case("nll_loss_none", "NegativeLogLikelihoodLoss", {"x": ((7, 5), normal)}, {"reduction": "none"},
             lambda x: F.nll_loss(x, labels(NLL_TARGET_2D), reduction="none"), constants={"target": NLL_TARGET_2D}),
        case("nll_loss_3d_weight_sum", "NegativeLogLikelihoodLoss", {"x": ((4, 6, 3), normal)}, {"reduction": "sum"},
             lambda x: F.nll_loss(x, labels(NLL_TARGET_3D), weight=weights(CLASS_WEIGHT6, x), reduction="sum"),
             constants={"target": NLL_TARGET_3D, "weight": CLASS_WEIGHT6}),
        case("sce_weight_ii_mean", "SoftmaxCrossEntropyLoss", {"x": ((7, 5), normal)}, {"ignore_index": -1},
             lambda x: F.cross_entropy(x, labels(SCE_TARGET), weight=weights(CLASS_WEIGHT5, x), ignore_index=-1),
             constants={"target": SCE_TARGET, "weight": CLASS_WEIGHT5}),
        case("sce_none_3d", "SoftmaxCrossEntropyLoss", {"x": ((4, 6, 3), normal)}, {"reduction": "none"},
             lambda x: F.cross_entropy(x, labels(NLL_TARGET_3D), reduction="none"), constants={"target": NLL_TARGET_3D}),
        case("gather_elements_runtime", "GatherElements", {"x": ((4, 7, 5), normal)}, {"axis": 1},
             lambda x: torch.gather(x, 1, labels(GATHER_INDEX)), constants={"index": GATHER_INDEX}),
        # Comparisons and boolean ops on runtime tensors (LogicPatterns.cpp):
        # masks without a gradient that choose which branch's flows.
        case("where_greater_runtime", "graph.compare", {"a": ((3, 5, 7), normal), "b": ((5, 1), normal)}, {},
             lambda a, b: torch.where(a > b, a * b, b - a),
             nodes=[helper.make_node("Greater", ["a", "b"], ["m"]), helper.make_node("Mul", ["a", "b"], ["ab"]),
                    helper.make_node("Sub", ["b", "a"], ["ba"]), helper.make_node("Where", ["m", "ab", "ba"], ["y"])]),
        case("masks_and_or_xor_not", "graph.compare", {"a": ((5, 7), normal), "b": ((5, 7), normal)}, {},
             lambda a, b: torch.where((((a > b) | (a <= 0.3)) ^ (b >= 0)) & ~(a < -1), a * 2, torch.where(
                 (a > 0) == (a > b), a, b)),
             constants={"limit": scalar(0.3), "zero": scalar(0.0), "low": scalar(-1.0), "two": scalar(2.0)},
             nodes=[helper.make_node("Greater", ["a", "b"], ["m1"]),
                    helper.make_node("LessOrEqual", ["a", "const.limit"], ["m2"]),
                    helper.make_node("Or", ["m1", "m2"], ["m3"]),
                    helper.make_node("GreaterOrEqual", ["b", "const.zero"], ["m4"]),
                    helper.make_node("Xor", ["m3", "m4"], ["m5"]),
                    helper.make_node("Less", ["a", "const.low"], ["m6"]),
                    helper.make_node("Not", ["m6"], ["m7"]),
                    helper.make_node("And", ["m5", "m7"], ["m8"]),
                    helper.make_node("Relu", ["a"], ["ra"]),
                    helper.make_node("Cast", ["ra"], ["m9"], to=TensorProto.BOOL),
                    helper.make_node("Equal", ["m9", "m1"], ["m10"]),
                    helper.make_node("Where", ["m10", "a", "b"], ["inner"]),
                    helper.make_node("Mul", ["a", "const.two"], ["a2"]),
                    helper.make_node("Where", ["m8", "a2", "inner"], ["y"])]),
        case("sign_times", "graph.compare", {"a": ((5, 7), normal), "b": ((5, 7), normal)}, {},
             lambda a, b: torch.sign(a) * b,
             nodes=[helper.make_node("Sign", ["a"], ["s"]), helper.make_node("Mul", ["s", "b"], ["y"])]),
        case("thresholded_relu", "ThresholdedRelu", {"x": ((5, 7), normal)}, {"alpha": 0.4},
             lambda x: torch.where(x > 0.4, x, torch.zeros_like(x)), opset=10),
        case("shrink_soft", "Shrink", {"x": ((5, 7), normal)}, {"lambd": 0.5, "bias": 0.5},
             lambda x: F.softshrink(x, 0.5)),
        case("shrink_hard", "Shrink", {"x": ((5, 7), normal)}, {"lambd": 0.3}, lambda x: F.hardshrink(x, 0.3)),
        case("prelu_channels", "PRelu", {"x": ((2, 3, 4, 5), normal), "slope": ((3, 1, 1), normal)}, {},
             lambda x, s: F.prelu(x, s.reshape(3))),
        case("softsign", "Softsign", {"x": ((5, 7), normal)}, {}, F.softsign),
        case("selu", "Selu", {"x": ((5, 7), normal)}, {}, F.selu),
        case("celu", "Celu", {"x": ((5, 7), normal)}, {"alpha": 0.6}, lambda x: F.celu(x, 0.6), opset=12),
        case("sum_three_broadcast", "Sum", {"a": ((3, 5, 7), normal), "b": ((7,), normal), "c": ((5, 1), normal)}, {},
             lambda a, b, c: a + b + c),
        case("mean_two", "Mean", {"a": ((5, 7), normal), "b": ((5, 7), normal)}, {}, lambda a, b: (a + b) / 2),
        case("hardmax_times", "graph.one_hot", {"a": ((3, 5, 7), normal), "b": ((3, 5, 7), normal)}, {},
             lambda a, b: F.one_hot(a.argmax(1), 5).permute(0, 2, 1).to(b.dtype) * b + 0 * a,
             nodes=[helper.make_node("Hardmax", ["a"], ["h"], axis=1), helper.make_node("Mul", ["h", "b"], ["y"])]),
        case("global_max_pool", "GlobalMaxPool", {"x": ((3, 5, 4, 7), normal)}, {},
             lambda x: F.adaptive_max_pool2d(x, 1)),
        case("depth_to_space_dcr", "DepthToSpace", {"x": ((2, 12, 3, 5), normal)}, {"blocksize": 2},
             lambda x: x.reshape(2, 2, 2, 3, 3, 5).permute(0, 3, 4, 1, 5, 2).reshape(2, 3, 6, 10)),
        case("depth_to_space_crd", "DepthToSpace", {"x": ((2, 12, 3, 5), normal)}, {"blocksize": 2, "mode": "CRD"},
             lambda x: F.pixel_shuffle(x, 2)),
        case("space_to_depth", "SpaceToDepth", {"x": ((2, 3, 6, 4), normal)}, {"blocksize": 2},
             lambda x: x.reshape(2, 3, 3, 2, 2, 2).permute(0, 3, 5, 1, 2, 4).reshape(2, 12, 3, 2)),
        case("pad_constant_value", "Pad", {"x": ((2, 3, 5, 4), normal)}, {},
             lambda x: F.pad(x, (1, 2, 0, 3), value=0.5),
             constants={"pads": np.array([0, 0, 0, 1, 0, 0, 3, 2], np.int64), "value": scalar(0.5)}),
        case("pad_reflect_crop", "Pad", {"x": ((2, 3, 5, 4), normal)}, {"mode": "reflect"},
             lambda x: F.pad(x, (2, 3, 0, 0), mode="reflect")[:, 1:],
             constants={"pads": np.array([0, -1, 0, 2, 0, 0, 0, 3], np.int64)}),
        case("pad_edge", "Pad", {"x": ((2, 3, 5, 4), normal)}, {"mode": "edge"},
             lambda x: F.pad(x, (2, 1, 3, 0), mode="replicate"),
             constants={"pads": np.array([0, 0, 3, 2, 0, 0, 0, 1], np.int64)}),
        case("pad_wrap_axes_opset19", "Pad", {"x": ((2, 3, 5, 4), normal)}, {"mode": "wrap"},
             lambda x: F.pad(x, (1, 2, 0, 0), mode="circular"),
             constants={"pads": np.array([1, 2], np.int64), "value": scalar(0.0), "axes": np.array([-1], np.int64)},
             opset=19),
        case("sin", "Sin", {"x": ((5, 7), wide)}, {}, torch.sin),
        case("cos", "Cos", {"x": ((5, 7), wide)}, {}, torch.cos),
        case("tan", "Tan", {"x": ((5, 7), inside_unit)}, {}, torch.tan),
        case("asin", "Asin", {"x": ((5, 7), inside_unit)}, {}, torch.asin),
        case("acos", "Acos", {"x": ((5, 7), inside_unit)}, {}, torch.acos),
        case("atan", "Atan", {"x": ((5, 7), wide)}, {}, torch.atan),
        case("sinh", "Sinh", {"x": ((5, 7), normal)}, {}, torch.sinh, opset=9),
        case("cosh", "Cosh", {"x": ((5, 7), normal)}, {}, torch.cosh, opset=9),
        case("asinh", "Asinh", {"x": ((5, 7), wide)}, {}, torch.asinh, opset=9),
        case("acosh", "Acosh", {"x": ((5, 7), above_one)}, {}, torch.acosh, opset=9),
        case("atanh", "Atanh", {"x": ((5, 7), inside_unit)}, {}, torch.atanh, opset=9),
        # The rounding ops have no gradient: a's is 0, b's the rounded a.
        case("floor_ceil_round_times", "graph.floor", {"a": ((5, 7), wide), "b": ((5, 7), normal)}, {},
             lambda a, b: (torch.floor(a) + torch.ceil(a * 0.5) + torch.round(a * 1.5)) * b + 0 * a,
             constants={"half": scalar(0.5), "three_halves": scalar(1.5)},
             nodes=[helper.make_node("Floor", ["a"], ["f"]),
                    helper.make_node("Mul", ["a", "const.half"], ["ah"]), helper.make_node("Ceil", ["ah"], ["c"]),
                    helper.make_node("Mul", ["a", "const.three_halves"], ["a3"]),
                    helper.make_node("Round", ["a3"], ["r"]),
                    helper.make_node("Add", ["f", "c"], ["fc"]), helper.make_node("Add", ["fc", "r"], ["s"]),
                    helper.make_node("Mul", ["s", "b"], ["y"])]),
        case("fmod", "Mod", {"a": ((5, 7), wide), "b": ((7,), away_from_zero)}, {"fmod": 1}, torch.fmod),
        case("remainder", "Mod", {"a": ((5, 7), wide), "b": ((5, 7), away_from_zero)}, {}, torch.remainder),
        case("mean_variance_normalization", "MeanVarianceNormalization", {"x": ((2, 3, 4, 5), normal)}, {},
             lambda x: (x - x.mean((0, 2, 3), keepdim=True)) / (
                 x.var((0, 2, 3), unbiased=False, keepdim=True).sqrt() + 1e-9)),
        case("lp_normalization_2", "LpNormalization", {"x": ((5, 7), normal)}, {"axis": 0},
             lambda x: F.normalize(x, p=2.0, dim=0, eps=0.0)),
        case("lp_normalization_1", "LpNormalization", {"x": ((5, 7), normal)}, {"p": 1},
             lambda x: F.normalize(x, p=1.0, dim=-1, eps=0.0)),
        # A zero element: its gradient is the product of the others, which
        # exp(sum(log)) would make NaN.
        case("reduce_prod_with_zero", "graph.mul", {"x": ((3, 5, 7), positive), "b": ((3, 1, 1), normal)}, {},
             lambda x, b: (x * torch.tensor(PROD_ZERO)).prod(1, keepdim=True).prod(2, keepdim=True) * b,
             constants={"zero": PROD_ZERO},
             nodes=[helper.make_node("Mul", ["x", "const.zero"], ["xz"]),
                    helper.make_node("ReduceProd", ["xz"], ["p"], axes=[1, 2]),
                    helper.make_node("Mul", ["p", "b"], ["y"])]),
        case("one_hot_times", "graph.compare", {"x": ((4, 6), normal)}, {},
             lambda x: F.one_hot(torch.tensor(ONE_HOT_LABELS) % 6, 6).to(x.dtype) * x,
             constants={"labels": ONE_HOT_LABELS, "depth": np.array(6, np.int64),
                        "values": np.array([0, 1], np.int64)},
             nodes=[helper.make_node("OneHot", ["const.labels", "const.depth", "const.values"], ["h"]),
                    helper.make_node("Cast", ["h"], ["hf"], to=TensorProto.FLOAT),
                    helper.make_node("Mul", ["hf", "x"], ["y"])]),
        case("eye_like_times", "graph.mul", {"x": ((5, 7), normal)}, {},
             lambda x: torch.tensor(np.eye(5, 7, 1), dtype=x.dtype) * x,
             nodes=[helper.make_node("EyeLike", ["x"], ["e"], k=1), helper.make_node("Mul", ["e", "x"], ["y"])]),
        case("top_k_largest", "TopK", {"x": ((4, 9), normal)}, {"axis": 1},
             lambda x: torch.topk(x, 3, dim=1).values, constants={"k": np.array([3], np.int64)}, outputs=2,
             opset=11),
        case("top_k_smallest_axis0", "TopK", {"x": ((6, 5), normal)}, {"axis": 0, "largest": 0},
             lambda x: torch.topk(x, 2, dim=0, largest=False).values, constants={"k": np.array([2], np.int64)},
             outputs=2, opset=11),
        # The indices output, as a router uses it: gather the chosen rows.
        case("top_k_indices_gather", "graph.arg_max", {"x": ((4, 9), normal), "table": ((9, 3), normal)}, {},
             lambda x, t: t[torch.topk(x, 2, dim=1).indices] * torch.topk(x, 2, dim=1).values.unsqueeze(-1),
             constants={"k": np.array([2], np.int64), "last": np.array([-1], np.int64)},
             nodes=[helper.make_node("TopK", ["x", "const.k"], ["v", "i"], axis=1),
                    helper.make_node("Gather", ["table", "i"], ["rows"]),
                    helper.make_node("Unsqueeze", ["v", "const.last"], ["vu"]),
                    helper.make_node("Mul", ["rows", "vu"], ["y"])]),
        case("scatter_elements_none", "graph.select", {"data": ((3, 5), normal), "updates": ((3, 2), normal)}, {},
             lambda d, u: d.scatter(1, torch.tensor(SCATTER_INDEX) % 5, u),
             constants={"indices": SCATTER_INDEX},
             nodes=[helper.make_node("ScatterElements", ["data", "const.indices", "updates"], ["y"], axis=1)],
             opset=11),
        case("scatter_elements_add_axis0", "graph.reduce_sum", {"data": ((4, 3), normal), "updates": ((6, 3), normal)},
             {}, lambda d, u: d.scatter_add(0, torch.tensor(SCATTER_ADD_INDEX), u),
             constants={"indices": SCATTER_ADD_INDEX},
             nodes=[helper.make_node("ScatterElements", ["data", "const.indices", "updates"], ["y"], axis=0,
                                     reduction="add")],
             opset=16),
        case("gather_nd_constant", "GatherND", {"data": ((3, 4, 5), normal)}, {},
             lambda d: d[torch.tensor([0, 2, -1]), torch.tensor([1, -1, 3])],
             constants={"indices": np.array([[0, 1], [2, -1], [-1, 3]], np.int64)}, opset=11),
        # Runtime indices, as a classification head picks each sample's
        # position (here the argmax of x): batch_dims 1.
        case("gather_nd_runtime_batch", "graph.gather", {"x": ((3, 4), normal), "data": ((3, 4, 5), normal)}, {},
             lambda x, d: d[torch.arange(3), x.argmax(1)] + 0 * x.sum(),
             nodes=[helper.make_node("ArgMax", ["x"], ["i"], axis=1, keepdims=1),
                    helper.make_node("GatherND", ["data", "i"], ["y"], batch_dims=1)]),
        # Recurrent layers against torch's modules run with the same
        # weights (reordered to torch's gates), unrolled over 4 steps.
        case("lstm", "LSTM", {"x": ((4, 3, 5), normal), "w": ((1, 24, 5), normal), "r": ((1, 24, 6), normal),
                              "b": ((1, 48), normal)}, {"hidden_size": 6},
             lambda x, w, r, b: torch_recurrent("lstm", x, w, r, b, LSTM_ORDER)[0].unsqueeze(1), outputs=3),
        case("lstm_reverse_cell_state", "LSTM",
             {"x": ((4, 3, 5), normal), "w": ((1, 24, 5), normal), "r": ((1, 24, 6), normal),
              "b": ((1, 48), normal)}, {"hidden_size": 6, "direction": "reverse"},
             lambda x, w, r, b: torch_recurrent("lstm", x.flip(0), w, r, b, LSTM_ORDER)[2], outputs=3, take=2),
        case("gru_bidirectional", "GRU", {"x": ((4, 3, 5), normal), "w": ((2, 18, 5), normal),
                                          "r": ((2, 18, 6), normal), "b": ((2, 36), normal)},
             {"hidden_size": 6, "direction": "bidirectional", "linear_before_reset": 1},
             lambda x, w, r, b: torch_recurrent("gru", x, w, r, b, GRU_ORDER)[0].view(4, 3, 2, 6).permute(0, 2, 1, 3),
             outputs=2),
        case("gru_reset_before", "GRU", {"x": ((4, 3, 5), normal), "w": ((1, 18, 5), normal),
                                         "r": ((1, 18, 6), normal), "b": ((1, 36), normal)}, {"hidden_size": 6},
             gru_reset_before, outputs=2),
        case("rnn_relu_batch_first", "RNN", {"x": ((3, 4, 5), normal), "w": ((1, 6, 5), normal),
                                             "r": ((1, 6, 6), normal), "b": ((1, 12), normal)},
             {"hidden_size": 6, "activations": ["Relu"], "layout": 1},
             lambda x, w, r, b: torch_recurrent("rnn_relu", x, w, r, b, [0], batch_first=True)[0].unsqueeze(2), outputs=2, opset=14),
        # A rotary embedding as recent exports compute it at run time:
        # x * cos(a) + rotate_half(x) * sin(a), the angles trained too.
        case("rotary_runtime", "graph.sin", {"x": ((2, 5, 8), normal), "angles": ((5, 4), wide)}, {},
             lambda x, a: x * torch.cat([a, a], -1).cos() + torch.cat([-x[..., 4:], x[..., :4]], -1) * torch.cat(
                 [a, a], -1).sin(),
             constants={"split": np.array([4, 4], np.int64)},
             nodes=[helper.make_node("Concat", ["angles", "angles"], ["emb"], axis=-1),
                    helper.make_node("Cos", ["emb"], ["cos"]), helper.make_node("Sin", ["emb"], ["sin"]),
                    helper.make_node("Split", ["x", "const.split"], ["x1", "x2"], axis=-1),
                    helper.make_node("Neg", ["x2"], ["nx2"]),
                    helper.make_node("Concat", ["nx2", "x1"], ["rot"], axis=-1),
                    helper.make_node("Mul", ["x", "cos"], ["xc"]), helper.make_node("Mul", ["rot", "sin"], ["rs"]),
                    helper.make_node("Add", ["xc", "rs"], ["y"])]),
    ]


def build_model(spec, values, out_shape, weight):
    n = int(np.prod(out_shape))
    initializers = [numpy_helper.from_array(values[p], p) for p in spec["params"]]
    # A subgraph's constants are Constant nodes, as torch exports scalars.
    constant_nodes = [helper.make_node("Constant", [], ["const." + name], value=numpy_helper.from_array(value))
                      for name, value in spec["constants"].items()] if spec["nodes"] else []
    if not spec["nodes"]:
        initializers += [numpy_helper.from_array(value, "const." + name) for name, value in spec["constants"].items()]
    initializers += [numpy_helper.from_array(weight.reshape(n, 1), "const.w"),
                     numpy_helper.from_array(np.array([1, n], np.int64), "const.row"),
                     numpy_helper.from_array(np.array([], np.int64), "const.scalar")]
    constant_names = ["const." + name for name in spec["constants"]]
    inputs = constant_names + list(spec["params"]) if spec["constants_first"] else list(spec["params"]) + constant_names
    outputs = ["y" if i == spec["take"] else "unused%d" % i for i in range(spec["outputs"])]
    nodes = constant_nodes + spec["nodes"] if spec["nodes"] else [
        helper.make_node(spec["op"], inputs, outputs, name="op", **spec["attrs"])]
    # The loss sum(y * w) as one product [1, n] x [n, 1]: no elementwise
    # product for graph-fuse to take y into (gelu(x) * w is a gated_activation).
    nodes = nodes + [helper.make_node("Reshape", ["y", "const.row"], ["row"], name="row"),
                     helper.make_node("MatMul", ["row", "const.w"], ["total"], name="sum"),
                     helper.make_node("Reshape", ["total", "const.scalar"], ["loss"], name="loss")]
    graph = helper.make_graph(nodes, "gradient_check", [],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", spec["opset"])])
    if spec["opset"] >= 19:
        model.ir_version = 9  # what onnx 1.14 and later write for these opsets
    return model


def check(spec, work, rtol, rng):
    values = {p: sampler(rng, shape) for p, (shape, sampler) in spec["params"].items()}
    torch_params = [torch.tensor(values[p].astype(np.float64), requires_grad=True) for p in spec["params"]]
    y = spec["torch"](*torch_params)
    weight = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    loss = (y * torch.tensor(weight.astype(np.float64))).sum()
    loss.backward()

    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(build_model(spec, values, tuple(y.shape), weight), path)
    plan, saved, metrics = (os.path.join(work, f) for f in ("plan.bin", "after.safetensors", "m.jsonl"))
    ir_dir = os.path.join(work, "ir")
    run(["fsdpc", path, "-o", plan, "--loss", "output:loss", "--optimizer", "sgd", "--lr", repr(LR), "--momentum", "0",
         "--weight-decay", "0", "--freeze", r"const\..*", "--dump-ir", ir_dir])
    run(["fsdp-run", plan, "--steps", "1", "--save", saved, "--metrics-json", metrics])
    if spec["nodes"] and spec["op"] + " " not in open(os.path.join(ir_dir, "01-graph.mlir")).read():
        print("%-26s %s was not fused  <-- exceeds" % (spec["name"], spec["op"]))
        return 1
    after = read_safetensors(saved)
    ours_loss = read_losses(metrics)[0]

    failures = 0
    magnitude = (y.abs() * torch.tensor(np.abs(weight).astype(np.float64))).sum().item()
    loss_rel = abs(ours_loss - loss.item()) / max(magnitude, 1e-12)
    worst = ("loss", loss_rel)
    HEADROOM.add("loss vs float64", loss_rel, rtol)
    failures += loss_rel > rtol
    for p, tp in zip(spec["params"], torch_params):
        ours = (values[p].astype(np.float64) - after[p].astype(np.float64)) / LR
        rel = norm_rel(ours, tp.grad.numpy())
        HEADROOM.add("gradient vs float64", rel, rtol)
        if rel > worst[1]:
            worst = (p, rel)
        failures += rel > rtol
    print("%-26s %-11s worst %-6s %.2e%s" % (spec["name"], spec["op"], worst[0], worst[1],
                                             "  <-- exceeds %g" % rtol if failures else ""))
    return failures


def check_dropout(work, rng, ratio=0.3):
    """Dropout's mask is random, so torch cannot supply it; instead the
    gradient reveals the mask fsdpc used in backward (zero where dropped,
    W / (1 - ratio) where kept) and the forward loss must be the one that
    same mask gives, which holds only if backward redrew forward's mask."""
    shape = (7, 9, 5)
    x = rng.standard_normal(shape).astype(np.float32)
    weight = rng.standard_normal(shape).astype(np.float32)
    n = x.size
    initializers = [numpy_helper.from_array(x, "x"), numpy_helper.from_array(weight, "const.w"),
                    numpy_helper.from_array(np.ones((n, 1), np.float32), "const.ones"),
                    numpy_helper.from_array(np.array([1, n], np.int64), "const.row"),
                    numpy_helper.from_array(np.array([], np.int64), "const.scalar"),
                    numpy_helper.from_array(np.array(ratio, np.float32), "const.ratio"),
                    numpy_helper.from_array(np.array(True), "const.training")]
    nodes = [helper.make_node("Dropout", ["x", "const.ratio", "const.training"], ["y"], name="drop"),
             helper.make_node("Mul", ["y", "const.w"], ["weighted"], name="weigh"),
             helper.make_node("Reshape", ["weighted", "const.row"], ["row"], name="row"),
             helper.make_node("MatMul", ["row", "const.ones"], ["total"], name="sum"),
             helper.make_node("Reshape", ["total", "const.scalar"], ["loss"], name="loss")]
    graph = helper.make_graph(nodes, "dropout_check", [], [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                              initializers)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    plan, saved, metrics = (os.path.join(work, f) for f in ("plan.bin", "after.safetensors", "m.jsonl"))
    run(["fsdpc", path, "-o", plan, "--loss", "output:loss", "--optimizer", "sgd", "--lr", repr(LR), "--momentum", "0",
         "--weight-decay", "0", "--freeze", r"const\..*"])
    run(["fsdp-run", plan, "--steps", "1", "--save", saved, "--metrics-json", metrics])
    grad = (x.astype(np.float64) - read_safetensors(saved)["x"].astype(np.float64)) / LR
    kept = np.abs(grad) > 1e-3 * np.abs(weight)
    expected_grad = np.where(kept, weight / (1 - ratio), 0.0)
    loss = read_losses(metrics)[0]
    expected_loss = float(np.sum(np.where(kept, x.astype(np.float64) / (1 - ratio), 0.0) * weight))
    grad_rel = norm_rel(grad, expected_grad)
    magnitude = float(np.sum(np.abs(np.where(kept, x.astype(np.float64) / (1 - ratio), 0.0) * weight)))
    loss_rel = abs(loss - expected_loss) / max(magnitude, 1e-12)
    dropped = 1 - kept.mean()
    bad = grad_rel > 1e-5 or loss_rel > 1e-5 or abs(dropped - ratio) > 0.1
    print("%-26s %-11s grad %.2e, loss from the same mask %.2e, dropped %.2f of %d (ratio %.2f)%s"
          % ("dropout_mask_consistency", "Dropout", grad_rel, loss_rel, dropped, n, ratio,
             "  <-- exceeds" if bad else ""))
    return int(bad)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", required=True)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--filter", default="")
    args = parser.parse_args()
    rng = np.random.default_rng(11)
    failures = 0
    checked = 0
    for spec in cases():
        if args.filter in spec["name"]:
            failures += bool(check(spec, os.path.join(args.work, spec["name"]), args.rtol, rng))
            checked += 1
    if args.filter in "dropout_mask_consistency":
        failures += check_dropout(os.path.join(args.work, "dropout"), rng)
        checked += 1
    HEADROOM.print()
    print("gradient checks: %d passed, %d failed" % (checked - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
