#!/usr/bin/python3
"""Writes a small model as torch.onnx.export(..., dynamo=True) leaves it:
the graph signature and each node's FX node in metadata, and three
anonymous initializers the exporter's optimizer folded:

  val_1      fc.weight transposed (its reader's FX node names p_fc_weight),
  cos_table  a rotary table folded from a buffer (its reader names none),
  val_9      read only by a node the optimizer made (no FX metadata).

With --unaccounted, the signature also has a parameter 'pos.weight' that
no initializer or FX node accounts for (folded beyond recognition).

With --gone, a last product reads proj.weight, and its FX node also names
proj.bias, which the graph lacks: the optimizer dropped a zero bias.

With --folded-values, another model: two RMSNorm scales `1 + weight`
(Gemma's), folded into initializers named after their FX values and
merged, so the second norm's FX node names `%add_9` but reads `add_4`.

With --merged, another model: what the optimizer merges by value.

  val_55, val_57  the [4, 1] weight of ones and bias of zeros of two
                  GroupNorms (gn1, gn2), merged into one initializer each;
  val_40, val_41  the ones and zeros the exporter's GroupNorm translation
                  makes for InstanceNormalization over the 2 groups;
  ln.weight       an affine LayerNorm's weight of ones, which the ones of an
                  affine-free LayerNorm after it were merged into;
  scale           read by a Mul whose FX node names `%clone`, a clone of the
                  parameter whose Identity the optimizer removed;
  val_60          emb.weight transposed, read by two products (tied);
  conv.weight     the Conv in front, into which the optimizer folded the
                  eval-mode BatchNorm `bn` after it: the Conv node carries
                  the BatchNorm's FX node, which names bn.weight and bn.bias.

onnx 1.12's Python API has no metadata_props on graphs and nodes, so the
fields (NodeProto 9, GraphProto 16) are appended as protobuf bytes, which
parsing keeps as unknown fields.

  dynamo_folded_constants.py OUT.onnx [--unaccounted | --gone | --merged | --folded-values]"""
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


def fx(name, target, args):
    return "%%%s : [num_users=1] = call_function[target=torch.ops.aten.%s](args = (%s), kwargs = {})" % (
        name, target, args)


def merged_model():
    gn = "group_norm.default"
    nodes = [with_fx(helper.make_node("Conv", ["x", "conv.weight"], ["getitem"], name="node_Conv_3"),
                     fx("_native_batch_norm_legit_no_training", "_native_batch_norm_legit_no_training.default",
                        "%conv1d, %p_bn_weight, %p_bn_bias, %b_bn_running_mean, %b_bn_running_var, 0.1, 1e-05"))]
    for i, (source, out) in enumerate([("getitem", "group_norm"), ("group_norm", "group_norm_1")]):
        text = fx(out, gn, "%%%s, 2, %%p_gn%d_weight, %%p_gn%d_bias, 1e-05, False" % (source, i + 1, i + 1))
        nodes += [with_fx(helper.make_node("Reshape", [source, "groups_shape"], [out + "_r"], name=out + "_r"), text),
                  with_fx(helper.make_node("InstanceNormalization", [out + "_r", "val_40", "val_41"], [out + "_in"],
                                           name=out + "_in"), text),
                  with_fx(helper.make_node("Reshape", [out + "_in", "x_shape"], [out + "_n"], name=out + "_n"), text),
                  with_fx(helper.make_node("Mul", [out + "_n", "val_55"], [out + "_m"], name=out + "_m"), text),
                  with_fx(helper.make_node("Add", [out + "_m", "val_57"], [out], name=out), text)]
    nodes += [
        with_fx(helper.make_node("LayerNormalization", ["group_norm_1", "ln.weight", "ln.bias"], ["layer_norm"],
                                 name="node_layer_norm"),
                fx("layer_norm", "layer_norm.default", "%group_norm_1, [3], %p_ln_weight, %p_ln_bias, 1e-05")),
        with_fx(helper.make_node("LayerNormalization", ["layer_norm", "ln.weight"], ["layer_norm_1"],
                                 name="node_layer_norm_1"),
                fx("layer_norm_1", "layer_norm.default", "%layer_norm, [3], None, None, 1e-05")),
        with_fx(helper.make_node("Mul", ["layer_norm_1", "scale"], ["mul"], name="node_mul"),
                fx("mul", "mul.Tensor", "%layer_norm_1, %clone")),
        with_fx(helper.make_node("MatMul", ["mul", "val_60"], ["linear"], name="node_linear"),
                fx("linear", "linear.default", "%mul, %p_emb_weight")),
        with_fx(helper.make_node("MatMul", ["layer_norm", "val_60"], ["linear_1"], name="node_linear_1"),
                fx("linear_1", "linear.default", "%layer_norm, %p_emb_weight")),
        with_fx(helper.make_node("Add", ["linear", "linear_1"], ["y"], name="node_add"),
                fx("add", "add.Tensor", "%linear, %linear_1")),
    ]
    rng = np.random.default_rng(7)
    initializers = [numpy_helper.from_array(np.array([2, 2, -1], np.int64), "groups_shape"),
                    numpy_helper.from_array(np.array([2, 4, 3], np.int64), "x_shape"),
                    numpy_helper.from_array(np.ones(2, np.float32), "val_40"),
                    numpy_helper.from_array(np.zeros(2, np.float32), "val_41"),
                    numpy_helper.from_array(np.ones((4, 1), np.float32), "val_55"),
                    numpy_helper.from_array(np.zeros((4, 1), np.float32), "val_57"),
                    numpy_helper.from_array(np.ones(3, np.float32), "ln.weight"),
                    numpy_helper.from_array(np.zeros(3, np.float32), "ln.bias"),
                    numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "scale"),
                    numpy_helper.from_array(rng.standard_normal((3, 5)).astype(np.float32), "val_60"),
                    numpy_helper.from_array(rng.standard_normal((4, 4, 1)).astype(np.float32), "conv.weight")]
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 5])], initializers)
    signature = "\n".join("p_%s: PARAMETER target='%s'" % (p.replace(".", "_"), p) for p in [
        "conv.weight", "bn.weight", "bn.bias", "gn1.weight", "gn1.bias", "gn2.weight", "gn2.bias", "ln.weight",
        "ln.bias", "scale", "emb.weight"])
    signature += "\nb_bn_running_mean: BUFFER target='bn.running_mean'\nb_bn_running_var: BUFFER target='bn.running_var'"
    return graph, signature


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
if "--gone" in sys.argv[2:]:
    graph.node[-1].output[0] = "add"
    graph.node.append(with_fx(helper.make_node("MatMul", ["add", "proj.weight"], ["y"], name="node_MatMul_12"),
                              "%linear_1 : [num_users=1] = call_function[target=torch.ops.aten.linear.default]"
                              "(args = (%add, %p_proj_weight, %p_proj_bias), kwargs = {})"))
    graph.initializer.append(numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "proj.weight"))
    signature += "\np_proj_weight: PARAMETER target='proj.weight'\np_proj_bias: PARAMETER target='proj.bias'"
if "--merged" in sys.argv[2:]:
    graph, signature = merged_model()
if "--folded-values" in sys.argv[2:]:
    nodes = [with_fx(helper.make_node("Mul", ["x", "add_4"], ["mul_5"], name="node_mul_5"),
                     fx("mul_5", "mul.Tensor", "%x, %add_4")),
             with_fx(helper.make_node("Mul", ["mul_5", "add_4"], ["y"], name="node_mul_11"),
                     fx("mul_11", "mul.Tensor", "%mul_5, %add_9"))]
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(np.ones(3, np.float32), "add_4")])
    signature = "p_n1_weight: PARAMETER target='n1.weight'\np_n2_weight: PARAMETER target='n2.weight'"
tagged = onnx.GraphProto()
tagged.ParseFromString(graph.SerializeToString() +
                       field(16, entry("pkg.torch.export.ExportedProgram.graph_signature", signature)))
model = helper.make_model(tagged, opset_imports=[helper.make_opsetid("", 18)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
