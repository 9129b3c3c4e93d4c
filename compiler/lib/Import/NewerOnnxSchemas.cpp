//===- NewerOnnxSchemas.cpp - ONNX op versions newer than libonnx ---------===//
//
// fsdpc builds with Debian's libonnx 1.12, whose checker and shape inference
// know the default opset up to 17. Exports from newer torch use opsets 18 to
// 21, where a few ops fsdpc supports changed their signature (the
// reductions' axes became an input, Split gained num_outputs) or first appeared (Gelu,
// Mish, GroupNormalization), or gained attributes (Resize's axes);
// the other changes of opsets 19 and 21 add element types (float8, int4).
// Registering those versions here lets the same checker and shape inference
// run on such models; every other op resolves to its newest version at or
// below the model's opset, which is unchanged for the ops fsdpc imports.
//
//===----------------------------------------------------------------------===//
#include "NewerOnnxSchemas.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>
#include <onnx/defs/tensor_proto_util.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace fsdpc::import {
namespace {

using onnx::AttributeProto;
using onnx::InferenceContext;

const std::vector<std::string> kFloatTypes = {"tensor(float16)", "tensor(float)", "tensor(double)",
                                              "tensor(bfloat16)"};

/// The constant values of input `index` if the graph gives them as a tensor
/// of element type `type` (whose C++ type is T).
template <typename T>
std::optional<std::vector<T>> constantValues(InferenceContext &ctx, size_t index, int32_t type) {
  if (ctx.getNumInputs() <= index)
    return std::nullopt;
  const onnx::TensorProto *data = ctx.getInputData(index);
  if (!data || data->data_type() != type)
    return std::nullopt;
  return onnx::ParseData<T>(data);
}

std::optional<std::vector<int64_t>> constantInts(InferenceContext &ctx, size_t index) {
  return constantValues<int64_t>(ctx, index, onnx::TensorProto::INT64);
}
std::optional<std::vector<float>> constantFloats(InferenceContext &ctx, size_t index) {
  return constantValues<float>(ctx, index, onnx::TensorProto::FLOAT);
}

/// A default-domain schema of `name` since opset `since`.
onnx::OpSchema newSchema(const char *name, int since, const char *doc) {
  onnx::OpSchema schema;
  schema.SetName(name).SetDomain(onnx::ONNX_DOMAIN).SinceVersion(since).SetDoc(doc);
  return schema;
}

onnx::OpSchema gelu20() {
  onnx::OpSchema schema = newSchema("Gelu", 20, "Gaussian error linear unit, exact (erf) or tanh approximation.");
  schema.Attr("approximate", "none or tanh", AttributeProto::STRING, std::string("none"))
      .Input(0, "X", "input", "T")
      .Output(0, "Y", "output", "T")
      .TypeConstraint("T", kFloatTypes, "float tensors")
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  return schema;
}

onnx::OpSchema mish18() {
  onnx::OpSchema schema = newSchema("Mish", 18, "x * tanh(softplus(x)).");
  schema.Input(0, "X", "input", "T")
      .Output(0, "Y", "output", "T")
      .TypeConstraint("T", kFloatTypes, "float tensors")
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  return schema;
}

/// GroupNormalization: opset 18 has a scale and bias per group, opset 21
/// per channel (and stash_type, the precision of the statistics).
onnx::OpSchema groupNormalization(int since) {
  onnx::OpSchema schema = newSchema("GroupNormalization", since,
                                    "Normalises each group of channels over its channels and positions.");
  schema.Attr("epsilon", "added to the variance", AttributeProto::FLOAT, 1e-5f)
      .Attr("num_groups", "the number of groups the channels are split into", AttributeProto::INT, true)
      .Input(0, "X", "input [N, C, spatial...]", "T")
      .Input(1, "scale", since >= 21 ? "per channel" : "per group", "T")
      .Input(2, "bias", since >= 21 ? "per channel" : "per group", "T")
      .Output(0, "Y", "output", "T")
      .TypeConstraint("T", kFloatTypes, "float tensors")
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  if (since >= 21)
    schema.Attr("stash_type", "the type of the statistics (1: float)", AttributeProto::INT, static_cast<int64_t>(1));
  return schema;
}

/// Resize since opset 18 (antialias, axes, keep_aspect_ratio_policy) and 19
/// (the half_pixel_symmetric coordinates). The output shape is inferred from
/// constant scales or sizes of the listed axes.
onnx::OpSchema resize(int since) {
  onnx::OpSchema schema = newSchema("Resize", since, "Resizes a tensor by interpolation.");
  schema.Attr("antialias", "antialiasing filter when downsampling", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("axes", "the axes scales, sizes and roi refer to", AttributeProto::INTS, false)
      .Attr("coordinate_transformation_mode", "how output coordinates map to input ones", AttributeProto::STRING,
            std::string("half_pixel"))
      .Attr("cubic_coeff_a", "the cubic kernel's parameter", AttributeProto::FLOAT, -0.75f)
      .Attr("exclude_outside", "zero weight outside the input", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("extrapolation_value", "value outside the input (tf_crop_and_resize)", AttributeProto::FLOAT, 0.0f)
      .Attr("keep_aspect_ratio_policy", "stretch, not_larger or not_smaller", AttributeProto::STRING,
            std::string("stretch"))
      .Attr("mode", "nearest, linear or cubic", AttributeProto::STRING, std::string("nearest"))
      .Attr("nearest_mode", "rounding of nearest", AttributeProto::STRING, std::string("round_prefer_floor"))
      .Input(0, "X", "input", "T1")
      .Input(1, "roi", "region of interest", "T2", onnx::OpSchema::Optional)
      .Input(2, "scales", "scale per axis", "tensor(float)", onnx::OpSchema::Optional)
      .Input(3, "sizes", "output size per axis", "tensor(int64)", onnx::OpSchema::Optional)
      .Output(0, "Y", "output", "T1")
      .TypeConstraint("T1", onnx::OpSchema::all_tensor_types_with_bfloat(), "any tensor")
      .TypeConstraint("T2", kFloatTypes, "float tensors")
      .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        if (!onnx::hasInputShape(ctx, 0))
          return;
        const onnx::TensorShapeProto &in = onnx::getInputShape(ctx, 0);
        const int64_t rank = in.dim_size();
        std::vector<int64_t> axes;
        if (const AttributeProto *given = ctx.getAttribute("axes"))
          axes.assign(given->ints().begin(), given->ints().end());
        else
          for (int64_t d = 0; d < rank; ++d)
            axes.push_back(d);
        std::optional<std::vector<float>> scales = constantFloats(ctx, 2);
        std::optional<std::vector<int64_t>> sizes = constantInts(ctx, 3);
        if (scales && scales->empty())
          scales.reset();
        if (sizes && sizes->empty())
          sizes.reset();
        if (!scales && !sizes)
          return;
        const size_t count = scales ? scales->size() : sizes->size();
        if (count != axes.size())
          fail_shape_inference("Resize has ", count, " scales or sizes for ", axes.size(), " axes");
        onnx::TensorShapeProto *out = onnx::getOutputShape(ctx, 0);
        *out = in;
        for (size_t i = 0; i < axes.size(); ++i) {
          const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
          if (axis < 0 || axis >= rank)
            fail_shape_inference("Resize axis ", axes[i], " is out of range for rank ", rank);
          if (sizes)
            out->mutable_dim(axis)->set_dim_value((*sizes)[i]);
          else if (in.dim(axis).has_dim_value())
            out->mutable_dim(axis)->set_dim_value(
                static_cast<int64_t>(std::floor(in.dim(axis).dim_value() * static_cast<double>((*scales)[i]))));
          else
            out->mutable_dim(axis)->clear_dim_value();
        }
      });
  return schema;
}

/// The reductions fsdpc imports since opset 18: axes is an optional int64
/// input.
onnx::OpSchema reduce18(const char *name) {
  onnx::OpSchema schema = newSchema(name, 18, "A reduction over the given axes (all when none are given).");
  schema.Attr("keepdims", "keep the reduced dimensions as size 1", AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("noop_with_empty_axes", "no axes means identity, not a full reduction", AttributeProto::INT,
            static_cast<int64_t>(0))
      .Input(0, "data", "input", "T")
      .Input(1, "axes", "axes to reduce", "tensor(int64)", onnx::OpSchema::Optional)
      .Output(0, "reduced", "output", "T")
      .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)",
                            "tensor(int32)", "tensor(int64)", "tensor(uint32)", "tensor(uint64)"},
                      "numeric tensors")
      .TypeAndShapeInferenceFunction([op = std::string(name)](InferenceContext &ctx) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        if (!onnx::hasInputShape(ctx, 0))
          return;
        const onnx::TensorShapeProto &in = onnx::getInputShape(ctx, 0);
        const int64_t rank = in.dim_size();
        const bool keepdims = onnx::getAttribute(ctx, "keepdims", 1) != 0;
        const bool hasAxesInput = ctx.getNumInputs() > 1 && ctx.getInputType(1);
        std::optional<std::vector<int64_t>> axes = hasAxesInput ? constantInts(ctx, 1) : std::vector<int64_t>{};
        if (!axes)
          return; // axes computed at run time: the shape is unknown here
        if (axes->empty()) {
          if (onnx::getAttribute(ctx, "noop_with_empty_axes", 0)) {
            onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
            return;
          }
          for (int64_t d = 0; d < rank; ++d)
            axes->push_back(d);
        }
        for (int64_t &axis : *axes) {
          if (axis < -rank || axis >= rank)
            fail_shape_inference(op, " axis ", axis, " is out of range for rank ", rank);
          axis = axis < 0 ? axis + rank : axis;
        }
        onnx::TensorShapeProto *out = onnx::getOutputShape(ctx, 0);
        for (int64_t d = 0; d < rank; ++d) {
          if (std::find(axes->begin(), axes->end(), d) == axes->end())
            *out->add_dim() = in.dim(d);
          else if (keepdims)
            out->add_dim()->set_dim_value(1);
        }
      });
  return schema;
}

/// Split since opset 18: `num_outputs` splits into that many parts, all of
/// ceil(size / num_outputs) but the last.
onnx::OpSchema split18() {
  onnx::OpSchema schema = newSchema("Split", 18, "Splits a tensor along an axis by sizes or into a number of parts.");
  schema.Attr("axis", "the split axis", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("num_outputs", "the number of parts when no sizes are given", AttributeProto::INT, false)
      .Input(0, "input", "input", "T")
      .Input(1, "split", "sizes of the parts", "tensor(int64)", onnx::OpSchema::Optional)
      .Output(0, "outputs", "the parts", "T", onnx::OpSchema::Variadic)
      .TypeConstraint("T", onnx::OpSchema::all_tensor_types_with_bfloat(), "any tensor")
      .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
        const size_t parts = ctx.getNumOutputs();
        for (size_t i = 0; i < parts; ++i)
          onnx::propagateElemTypeFromInputToOutput(ctx, 0, i);
        if (!onnx::hasInputShape(ctx, 0))
          return;
        const onnx::TensorShapeProto &in = onnx::getInputShape(ctx, 0);
        const int64_t rank = in.dim_size();
        int64_t axis = onnx::getAttribute(ctx, "axis", 0);
        if (axis < -rank || axis >= rank)
          fail_shape_inference("Split axis ", axis, " is out of range for rank ", rank);
        axis = axis < 0 ? axis + rank : axis;
        if (!in.dim(axis).has_dim_value())
          return;
        const int64_t size = in.dim(axis).dim_value();
        std::vector<int64_t> sizes;
        const bool hasSplitInput = ctx.getNumInputs() > 1 && ctx.getInputType(1);
        if (hasSplitInput) {
          std::optional<std::vector<int64_t>> given = constantInts(ctx, 1);
          if (!given)
            return;
          sizes = *given;
        } else {
          const int64_t count = onnx::getAttribute(ctx, "num_outputs", static_cast<int64_t>(parts));
          if (count != static_cast<int64_t>(parts) || count <= 0)
            fail_shape_inference("Split has ", parts, " outputs but num_outputs ", count);
          const int64_t chunk = (size + count - 1) / count;
          for (int64_t i = 0; i < count; ++i)
            sizes.push_back(std::max<int64_t>(0, std::min(chunk, size - chunk * i)));
        }
        if (sizes.size() != parts)
          fail_shape_inference("Split has ", parts, " outputs but ", sizes.size(), " sizes");
        for (size_t i = 0; i < parts; ++i) {
          onnx::TensorShapeProto *out = onnx::getOutputShape(ctx, i);
          *out = in;
          out->mutable_dim(axis)->set_dim_value(sizes[i]);
        }
      });
  return schema;
}

/// Pad since opset 18 (axes: the dimensions the pads are for) and 19 (mode
/// wrap). The output shape is inferred from constant pads and axes.
onnx::OpSchema pad(int since) {
  onnx::OpSchema schema = newSchema("Pad", since, "Pads a tensor by a constant, its reflection, edge or wrap.");
  schema.Attr("mode", "constant, reflect, edge or wrap", AttributeProto::STRING, std::string("constant"))
      .Input(0, "data", "input", "T")
      .Input(1, "pads", "begin pads of each axis, then end pads", "tensor(int64)")
      .Input(2, "constant_value", "value of mode constant", "T", onnx::OpSchema::Optional)
      .Input(3, "axes", "the axes the pads are for", "Tind", onnx::OpSchema::Optional)
      .Output(0, "output", "padded", "T")
      .TypeConstraint("T", onnx::OpSchema::all_tensor_types_with_bfloat(), "any tensor")
      .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "axes")
      .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        if (!onnx::hasNInputShapes(ctx, 1))
          return;
        const onnx::TensorShapeProto &in = ctx.getInputType(0)->tensor_type().shape();
        const int64_t rank = in.dim_size();
        std::optional<std::vector<int64_t>> pads = constantInts(ctx, 1);
        if (!pads)
          return;
        std::vector<int64_t> axes;
        if (ctx.getNumInputs() > 3 && ctx.getInputType(3)) {
          std::optional<std::vector<int64_t>> given = constantInts(ctx, 3);
          if (!given)
            return;
          for (int64_t axis : *given)
            axes.push_back(axis < 0 ? axis + rank : axis);
        } else {
          for (int64_t d = 0; d < rank; ++d)
            axes.push_back(d);
        }
        if (pads->size() != 2 * axes.size())
          return;
        onnx::TensorShapeProto *out = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
        out->CopyFrom(in);
        for (size_t k = 0; k < axes.size(); ++k) {
          if (axes[k] < 0 || axes[k] >= rank)
            return;
          onnx::TensorShapeProto::Dimension *dim = out->mutable_dim(static_cast<int>(axes[k]));
          if (dim->has_dim_value())
            dim->set_dim_value(dim->dim_value() + (*pads)[k] + (*pads)[k + axes.size()]);
          else
            dim->Clear();
        }
      });
  return schema;
}

} // namespace

void registerNewerOnnxSchemas() {
  static const bool registered = [] {
    // The registry refuses versions past its domain's range; the range is
    // only read by registration, so widening it changes nothing else.
    auto &ranges = const_cast<std::unordered_map<std::string, std::pair<int, int>> &>(
        onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map());
    std::pair<int, int> &range = ranges[onnx::ONNX_DOMAIN];
    range.second = std::max<int>(range.second, kNewestOnnxOpset);
    for (onnx::OpSchema schema :
         {gelu20(), mish18(), reduce18("ReduceMean"), reduce18("ReduceMax"), reduce18("ReduceMin"),
          reduce18("ReduceL1"), reduce18("ReduceL2"), reduce18("ReduceLogSum"), reduce18("ReduceLogSumExp"),
          reduce18("ReduceSumSquare"), split18(), groupNormalization(18), groupNormalization(21), resize(18),
          resize(19), pad(18), pad(19)})
      onnx::OpSchemaRegistry::OpSchemaRegisterOnce once(schema);
    return true;
  }();
  (void)registered;
}

} // namespace fsdpc::import
