//===- ResizePatterns.cpp - Resize and Upsample -----------------------------===//
//
// Resize is separable: each resized axis is a weighted sum of a few
// gathers along it (1 tap for nearest, 2 for linear, 4 for cubic), with
// constant indices and weights worked out here from the coordinate
// transformation, as ONNX's reference computes them. Neighbours past the
// edge read the edge (the reference pads with edge values); with
// exclude_outside their weight is dropped and the rest renormalised.
// gather_grad scatters the gradient back, so it trains on every backend.
// tf_crop_and_resize writes extrapolation_value where a position falls
// outside the input.
//
//===----------------------------------------------------------------------===//
#include "CompositePatterns.h"
#include "Compose.h"

#include <cmath>

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

namespace {

enum class Interpolation { kNearest, kLinear, kCubic };

struct ResizeSettings {
  Interpolation mode = Interpolation::kNearest;
  std::string coordinates = "half_pixel", nearest = "round_prefer_floor";
  double cubicA = -0.75;
  bool excludeOutside = false;
  double extrapolation = 0.0;
  SmallVector<double> roi;           // [starts..., ends...] for tf_crop_and_resize
  SmallVector<double> scales;        // per axis
  SmallVector<int64_t> outputShape;  // per axis
};

/// The taps of one axis: for every output position, each tap's input index
/// and weight, and whether the position lies inside the input.
struct AxisTaps {
  SmallVector<SmallVector<int64_t>> index;
  SmallVector<SmallVector<float>> weight;
  SmallVector<bool> inside;
};

/// Cubic convolution weights of the 4 neighbours floor-1 .. floor+2 at
/// fraction `t` past floor (Keys' kernel with parameter a).
std::array<double, 4> cubicWeights(double t, double a) {
  auto near = [&](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // |d| <= 1
  auto far = [&](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < |d| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

AxisTaps axisTaps(const ResizeSettings &s, int64_t axis, int64_t in, int64_t out, int64_t rank) {
  AxisTaps taps;
  const double scale = s.scales[axis];
  // The reference scales by the float length in * scale, not the rounded
  // output size.
  const double length = scale * static_cast<double>(in);
  for (int64_t i = 0; i < out; ++i) {
    double x;
    bool inside = true;
    if (s.coordinates == "align_corners")
      x = length == 1 ? 0.0 : i * static_cast<double>(in - 1) / (length - 1);
    else if (s.coordinates == "asymmetric")
      x = i / scale;
    else if (s.coordinates == "tf_half_pixel_for_nn")
      x = (i + 0.5) / scale;
    else if (s.coordinates == "pytorch_half_pixel")
      x = length > 1 ? (i + 0.5) / scale - 0.5 : 0.0;
    else if (s.coordinates == "tf_crop_and_resize") {
      const double start = s.roi[axis], end = s.roi[axis + rank];
      x = length == 1 ? (end - start) * (in - 1) / 2.0 : i * (end - start) * (in - 1) / (length - 1);
      x += start * (in - 1);
      inside = x >= 0 && x <= in - 1;
    } else if (s.coordinates == "half_pixel_symmetric") {
      // half_pixel about the input's centre, for an output rounded down.
      const double adjustment = out / length, center = in / 2.0;
      x = center * (1 - adjustment) + (i + 0.5) / scale - 0.5;
    } else // half_pixel
      x = (i + 0.5) / scale - 0.5;
    const double base = std::floor(x), t = x - base;
    auto clamp = [&](double c) { return std::clamp<int64_t>(static_cast<int64_t>(c), 0, in - 1); };
    SmallVector<int64_t> index;
    SmallVector<double> weight;
    switch (s.mode) {
    case Interpolation::kNearest: {
      double pick;
      if (s.nearest == "floor")
        pick = base;
      else if (s.nearest == "ceil")
        pick = std::ceil(x);
      else if (s.nearest == "round_prefer_ceil")
        pick = t >= 0.5 ? base + 1 : base;
      else // round_prefer_floor
        pick = t > 0.5 ? base + 1 : base;
      index = {clamp(pick)};
      weight = {1.0};
      break;
    }
    case Interpolation::kLinear:
      index = {clamp(base), clamp(base + 1)};
      weight = {1 - t, t};
      break;
    case Interpolation::kCubic: {
      std::array<double, 4> w = cubicWeights(t, s.cubicA);
      double total = 0;
      for (int k = 0; k < 4; ++k) {
        const double c = base - 1 + k;
        if (s.excludeOutside && (c < 0 || c > in - 1))
          w[k] = 0;
        total += w[k];
        index.push_back(clamp(c));
      }
      for (int k = 0; k < 4; ++k)
        weight.push_back(s.excludeOutside ? w[k] / total : w[k]);
      break;
    }
    }
    if (taps.index.empty()) {
      taps.index.resize(index.size());
      taps.weight.resize(index.size());
    }
    for (size_t k = 0; k < index.size(); ++k) {
      taps.index[k].push_back(index[k]);
      taps.weight[k].push_back(inside ? static_cast<float>(weight[k]) : 0.0f);
    }
    taps.inside.push_back(inside);
  }
  return taps;
}

/// The resized tensor: axis by axis, the weighted sum of its taps' gathers.
Value resize(NodeImporter &n, Value x, const ResizeSettings &s) {
  Compose b{n};
  ArrayRef<int64_t> inShape = shapeOf(x);
  const int64_t rank = inShape.size();
  SmallVector<int64_t> shape(inShape);
  SmallVector<AxisTaps> all(rank);
  bool crops = false;
  for (int64_t axis = 0; axis < rank; ++axis) {
    const int64_t in = inShape[axis], out = s.outputShape[axis];
    if (in == out && s.scales[axis] == 1.0 && s.coordinates != "tf_crop_and_resize")
      continue; // every coordinate transformation maps i to i here
    AxisTaps taps = axisTaps(s, axis, in, out, rank);
    shape[axis] = out;
    Value sum;
    for (size_t k = 0; k < taps.index.size(); ++k) {
      if (llvm::all_of(taps.weight[k], [](float w) { return w == 0; }))
        continue;
      auto indexType = RankedTensorType::get({out}, n.builder.getI64Type());
      Value index = graph::ConstantOp::create(n.builder, n.loc, indexType,
                                              DenseElementsAttr::get(indexType, ArrayRef<int64_t>(taps.index[k])));
      Value part = graph::GatherOp::create(n.builder, n.loc, n.f32Tensor(shape), x, index,
                                           n.builder.getI64IntegerAttr(axis));
      if (llvm::any_of(taps.weight[k], [](float w) { return w != 1; })) {
        SmallVector<int64_t> weightShape(rank, 1);
        weightShape[axis] = out;
        auto weightType = n.f32Tensor(weightShape);
        part = b.mul(part, graph::ConstantOp::create(n.builder, n.loc, weightType,
                                                     DenseElementsAttr::get(weightType, ArrayRef<float>(taps.weight[k]))));
      }
      sum = sum ? b.add(sum, part) : part;
    }
    if (!sum) { // every position of this axis is outside (tf_crop_and_resize)
      auto zeros = n.f32Tensor(shape);
      Value zero = graph::ConstantOp::create(n.builder, n.loc, zeros, DenseElementsAttr::get(zeros, 0.0f));
      sum = b.mul(zero, b.constant(1.0f));
    }
    x = sum;
    crops |= llvm::is_contained(taps.inside, false);
    all[axis] = std::move(taps);
  }
  if (crops && s.extrapolation != 0) {
    // extrapolation_value wherever some axis falls outside: the sum there
    // is 0, so add the value times the outside mask.
    SmallVector<float> outside(product(shape), 0.0f);
    for (int64_t i = 0; i < static_cast<int64_t>(outside.size()); ++i) {
      bool in = true;
      for (int64_t axis = rank - 1, rest = i; axis >= 0; --axis) {
        const int64_t c = rest % shape[axis];
        rest /= shape[axis];
        if (!all[axis].inside.empty() && !all[axis].inside[c])
          in = false;
      }
      outside[i] = in ? 0.0f : static_cast<float>(s.extrapolation);
    }
    auto type = n.f32Tensor(shape);
    x = b.add(x, graph::ConstantOp::create(n.builder, n.loc, type, DenseElementsAttr::get(type, ArrayRef<float>(outside))));
  }
  return x;
}

/// A constant float or int input as doubles (scales, roi, sizes), or none.
std::optional<SmallVector<double>> constantNumbers(NodeImporter &n, int i) {
  DenseElementsAttr value = n.constantInput(i);
  if (!value)
    return std::nullopt;
  SmallVector<double> numbers;
  if (value.getElementType().isF32())
    for (float v : value.getValues<float>())
      numbers.push_back(v);
  else
    for (int64_t v : value.getValues<int64_t>())
      numbers.push_back(static_cast<double>(v));
  return numbers;
}

/// Output shape and per-axis scales from `scales` (input `scalesIndex`) or
/// `sizes` (input `sizesIndex`, -1 for none), which name the dims in `axes`
/// (opset 18; all dims before). keep_aspect_ratio_policy not_larger /
/// not_smaller scales every listed axis by the smallest / largest ratio.
LogicalResult readScales(NodeImporter &n, ResizeSettings &s, int scalesIndex, int sizesIndex,
                         std::optional<SmallVector<int64_t>> axes = std::nullopt, StringRef policy = "stretch") {
  ArrayRef<int64_t> shape = shapeOf(n.input(0));
  const int64_t rank = shape.size();
  std::optional<SmallVector<double>> scales = constantNumbers(n, scalesIndex);
  std::optional<SmallVector<double>> sizes = sizesIndex >= 0 ? constantNumbers(n, sizesIndex) : std::nullopt;
  if (scales && scales->empty())
    scales.reset();
  if (sizes && sizes->empty())
    sizes.reset();
  if (n.hasInput(scalesIndex) && !n.constantInput(scalesIndex))
    return n.fail("scales must be a constant");
  if (sizesIndex >= 0 && n.hasInput(sizesIndex) && !n.constantInput(sizesIndex))
    return n.fail("sizes must be a constant");
  if (scales.has_value() == sizes.has_value())
    return n.fail("needs exactly one of scales and sizes");
  if (!axes) {
    axes.emplace();
    for (int64_t d = 0; d < rank; ++d)
      axes->push_back(d);
  }
  for (int64_t &axis : *axes) {
    axis += axis < 0 ? rank : 0;
    if (axis < 0 || axis >= rank)
      return n.fail("axes must lie in the input's rank " + Twine(rank));
  }
  const SmallVector<double> &given = scales ? *scales : *sizes;
  if (given.size() != axes->size())
    return n.fail(Twine(scales ? "scales" : "sizes") + " must have one entry per axis (" + Twine(axes->size()) + ")");
  s.scales.assign(rank, 1.0);
  s.outputShape.assign(shape.begin(), shape.end());
  std::optional<double> uniform;
  if (sizes && policy != "stretch") {
    for (size_t i = 0; i < axes->size(); ++i) {
      const double ratio = given[i] / shape[(*axes)[i]];
      uniform = !uniform ? ratio : policy == "not_larger" ? std::min(*uniform, ratio) : std::max(*uniform, ratio);
    }
  }
  for (size_t i = 0; i < axes->size(); ++i) {
    const int64_t d = (*axes)[i];
    if (given[i] <= 0)
      return n.fail("scales and sizes must be positive");
    int64_t out;
    double scale;
    if (uniform) {
      scale = *uniform;
      out = static_cast<int64_t>(std::round(scale * shape[d]));
    } else if (scales) {
      scale = given[i];
      out = static_cast<int64_t>(std::floor(shape[d] * given[i]));
    } else {
      out = static_cast<int64_t>(given[i]);
      scale = static_cast<double>(out) / shape[d];
    }
    if (out <= 0)
      return n.fail("the output would be empty in dimension " + Twine(d));
    s.outputShape[d] = out;
    s.scales[d] = scale;
  }
  return success();
}

LogicalResult readMode(NodeImporter &n, ResizeSettings &s) {
  const std::string mode = n.stringAttr("mode", "nearest");
  if (mode == "nearest")
    s.mode = Interpolation::kNearest;
  else if (mode == "linear" || mode == "bilinear")
    s.mode = Interpolation::kLinear;
  else if (mode == "cubic")
    s.mode = Interpolation::kCubic;
  else
    return n.fail("mode '" + mode + "' is not nearest, linear or cubic");
  return success();
}

} // namespace

LogicalResult fsdpc::import::convertResize(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  ResizeSettings s;
  if (failed(readMode(n, s)))
    return failure();
  if (n.opset < 11) { // Resize-10: X and scales, asymmetric coordinates
    s.coordinates = "asymmetric";
    s.nearest = "floor";
    if (failed(readScales(n, s, 1, -1)))
      return failure();
  } else {
    s.coordinates = n.stringAttr("coordinate_transformation_mode", "half_pixel");
    static const char *const kModes[] = {"half_pixel",         "pytorch_half_pixel",   "align_corners",
                                         "asymmetric",         "tf_half_pixel_for_nn", "tf_crop_and_resize",
                                         "half_pixel_symmetric"};
    if (!llvm::is_contained(kModes, StringRef(s.coordinates)))
      return n.fail("coordinate_transformation_mode '" + s.coordinates + "' is not supported");
    s.nearest = n.stringAttr("nearest_mode", "round_prefer_floor");
    static const char *const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    if (!llvm::is_contained(kNearest, StringRef(s.nearest)))
      return n.fail("nearest_mode '" + s.nearest + "' is not supported");
    s.cubicA = n.floatAttr("cubic_coeff_a", -0.75f);
    s.excludeOutside = n.intAttr("exclude_outside", 0) != 0;
    s.extrapolation = n.floatAttr("extrapolation_value", 0.0f);
    // Opset 18: scales, sizes and roi may name a subset of the axes.
    std::optional<SmallVector<int64_t>> axes = n.intsAttr("axes");
    const std::string policy = n.stringAttr("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      return n.fail("keep_aspect_ratio_policy '" + policy + "' is not stretch, not_larger or not_smaller");
    if (failed(readScales(n, s, 2, 3, axes, policy)))
      return failure();
    // Antialiasing filters only what is downsampled.
    if (n.intAttr("antialias", 0) != 0 && s.mode != Interpolation::kNearest &&
        llvm::any_of(s.scales, [](double scale) { return scale < 1; }))
      return n.fail("antialias when downsampling is not supported");
    if (s.coordinates == "tf_crop_and_resize" && axes) {
      // roi names the listed axes: widen it to every axis, the rest whole.
      std::optional<SmallVector<double>> roi = constantNumbers(n, 1);
      const size_t rank = shapeOf(n.input(0)).size();
      if (!roi || roi->size() != 2 * axes->size())
        return n.fail("tf_crop_and_resize needs a constant roi of 2 entries per axis");
      SmallVector<double> full(rank, 0.0);
      full.append(rank, 1.0);
      for (auto [i, axis] : llvm::enumerate(*axes)) {
        const int64_t d = axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
        full[d] = (*roi)[i];
        full[d + rank] = (*roi)[i + axes->size()];
      }
      s.roi = full;
    } else if (s.coordinates == "tf_crop_and_resize") {
      std::optional<SmallVector<double>> roi = constantNumbers(n, 1);
      if (!roi || roi->size() != 2 * shapeOf(n.input(0)).size())
        return n.fail("tf_crop_and_resize needs a constant roi of 2 entries per input dimension");
      s.roi = *roi;
    }
  }
  n.setOutput(0, resize(n, n.input(0), s));
  return success();
}

LogicalResult fsdpc::import::convertUpsample(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  ResizeSettings s;
  if (failed(readMode(n, s)))
    return failure();
  s.coordinates = "asymmetric";
  s.nearest = "floor";
  if (n.opset >= 9) {
    if (failed(readScales(n, s, 1, -1)))
      return failure();
  } else {
    std::optional<SmallVector<float>> scales;
    if (const onnx::AttributeProto *attr = n.attribute("scales"))
      scales = SmallVector<float>(attr->floats().begin(), attr->floats().end());
    ArrayRef<int64_t> shape = shapeOf(n.input(0));
    if (!scales || scales->size() != shape.size())
      return n.fail("scales must have one entry per input dimension");
    for (size_t d = 0; d < shape.size(); ++d) {
      s.scales.push_back((*scales)[d]);
      s.outputShape.push_back(static_cast<int64_t>(std::floor(shape[d] * (*scales)[d])));
    }
  }
  n.setOutput(0, resize(n, n.input(0), s));
  return success();
}

/// GridSample (opset 16: 4-D input, modes bilinear and nearest, padding
/// zeros, border and reflection). The grid's normalised (x, y) become pixel
/// coordinates (align_corners or not), border padding clamps them into the
/// image (reflection reflects them about its edges first), and
/// each output position reads 1 (nearest, rounded half to even as torch
/// does) or 4 (bilinear) pixels: the input moved channels-last and
/// flattened to [N*H*W, C] rows, one `gather` per tap at the tap's row
/// n*H*W + y*W + x (runtime indices, computed in i64), weighted by the
/// tap's share, zero where zeros padding leaves the tap outside. The
/// gradient reaches the input through gather_grad and the grid through the
/// weights, as torch's does (the taps' indices have none).
LogicalResult fsdpc::import::convertGridSample(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 2)))
    return failure();
  Value x = n.input(0), grid = n.input(1);
  ArrayRef<int64_t> xShape = shapeOf(x), gridShape = shapeOf(grid);
  if (xShape.size() != 4 || gridShape.size() != 4 || gridShape[3] != 2 || gridShape[0] != xShape[0])
    return n.fail("needs a 4-D input [N, C, H, W] and a grid [N, Ho, Wo, 2]");
  const std::string mode = n.stringAttr("mode", "bilinear"), padding = n.stringAttr("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest")
    return n.fail("mode '" + mode + "' is not supported (bilinear and nearest are)");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    return n.fail("padding_mode '" + padding + "' is not supported (zeros, border and reflection are)");
  const bool alignCorners = n.intAttr("align_corners", 0) != 0;
  const int64_t batch = xShape[0], channels = xShape[1], height = xShape[2], width = xShape[3];
  const int64_t outH = gridShape[1], outW = gridShape[2], positions = batch * outH * outW;
  Compose b{n};
  auto i64 = [&](ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, n.builder.getI64Type()); };

  // `v` clamped into [0, size - 1]: relu(v), then high - relu(high - v).
  auto clampToImage = [&](Value v, int64_t size) -> Value {
    Value aboveLow = b.relu(v);
    Value high = b.constant(static_cast<float>(size - 1));
    Value belowHigh = b.relu(b.sub(high, aboveLow));
    return b.sub(high, belowHigh);
  };
  // Pixel coordinates along one axis of `size` pixels from the grid's
  // component `component` ([N, Ho, Wo]).
  auto pixels = [&](int64_t component, int64_t size) -> Value {
    Value normalized = graph::SliceOp::create(n.builder, n.loc, n.f32Tensor({batch, outH, outW, 1}), grid,
                                              n.builder.getDenseI64ArrayAttr({0, 0, 0, component}),
                                              n.builder.getDenseI64ArrayAttr({1, 1, 1, 1}));
    Value flat = b.reshape(normalized, {batch, outH, outW});
    // align_corners: (g + 1) / 2 * (size - 1); else ((g + 1) * size - 1) / 2.
    Value shifted = b.add(flat, b.constant(1.0f));
    Value coordinate = b.scale(shifted, 0.5 * static_cast<double>(alignCorners ? size - 1 : size));
    if (!alignCorners) // one op per statement: the IR must not depend on argument order
      coordinate = b.add(coordinate, b.constant(-0.5f));
    if (padding == "reflection") {
      // Reflected about the image's edges (pixel centres with
      // align_corners, else the outer edges of the edge pixels), as torch's
      // reflect_coordinates: the distance from the low edge in spans, and
      // an odd number of spans runs backwards. Then clamped, as border.
      const double low = alignCorners ? 0.0 : -0.5;
      const double span = alignCorners ? static_cast<double>(size - 1) : static_cast<double>(size);
      if (span <= 0) {
        coordinate = b.scale(coordinate, 0.0);
      } else {
        Value offset = b.add(coordinate, b.constant(static_cast<float>(-low)));
        Value distance = b.abs(offset);
        Value inSpans = b.scale(distance, 1.0 / span);
        Value periods = b.unary<graph::FloorOp>(inSpans);
        Value whole = b.scale(periods, span);
        Value extra = b.sub(distance, whole);
        Value halves = b.unary<graph::FloorOp>(b.scale(periods, 0.5));
        Value evenPart = b.scale(halves, 2.0);
        Value odd = b.sub(periods, evenPart); // 0 or 1
        Value twiceExtra = b.scale(extra, 2.0);
        Value backwards = b.sub(b.constant(static_cast<float>(span)), twiceExtra);
        Value flip = b.mul(odd, backwards);
        Value reflected = b.add(extra, flip);
        coordinate = b.add(reflected, b.constant(static_cast<float>(low)));
      }
    }
    return padding == "zeros" ? coordinate : clampToImage(coordinate, size);
  };
  Value px = pixels(0, width);
  Value py = pixels(1, height);

  // The input as rows [N*H*W, C], and each sample's first row.
  Value channelsLast = b.transpose(x, {0, 2, 3, 1});
  Value rows = b.reshape(channelsLast, {batch * height * width, channels});
  SmallVector<int64_t> firstRows(positions);
  for (int64_t i = 0; i < positions; ++i)
    firstRows[i] = (i / (outH * outW)) * height * width;
  Value sampleRows =
      graph::ConstantOp::create(n.builder, n.loc, i64({batch, outH, outW}),
                                DenseElementsAttr::get(i64({batch, outH, outW}), ArrayRef<int64_t>(firstRows)));

  // One axis of a tap at integer-valued float coordinate v: its pixel
  // index clamped into the image (i64) and, with zeros padding, whether v
  // lies inside (i64 0/1). Each coordinate's are computed once and shared
  // by the taps that read it (bilinear's x0 by the top-left and the
  // bottom-left tap).
  struct AxisTap {
    Value index, inside;
  };
  auto axisTap = [&](Value v, int64_t size) -> AxisTap {
    AxisTap t;
    Value inRange = clampToImage(v, size);
    t.index = graph::CastOp::create(n.builder, n.loc, i64({batch, outH, outW}), inRange).getResult();
    if (padding == "zeros") {
      Value low = b.compare(v, b.constant(0.0f), graph::ComparePredicate::ge);
      Value high = b.compare(v, b.constant(static_cast<float>(size - 1)), graph::ComparePredicate::le);
      t.inside = b.mul(low, high);
    }
    return t;
  };
  // The tap at (x, y) with weight w: its rows gathered and weighted, zero
  // outside the image with zeros padding.
  auto tap = [&](const AxisTap &x, const AxisTap &y, Value weight) -> Value {
    Value rowStart = b.mul(y.index, b.integer(width));
    Value withinSample = b.add(rowStart, x.index);
    Value index = b.add(sampleRows, withinSample);
    Value flatIndex = b.reshape(index, {positions});
    Value picked = graph::GatherOp::create(n.builder, n.loc, n.f32Tensor({positions, channels}), rows, flatIndex,
                                           n.builder.getI64IntegerAttr(0));
    Value shown = weight;
    if (padding == "zeros") {
      Value both = b.mul(x.inside, y.inside);
      Value visible = graph::CastOp::create(n.builder, n.loc, n.f32Tensor({batch, outH, outW}), both).getResult();
      shown = b.mul(weight, visible);
    }
    Value perRow = b.reshape(shown, {positions, 1});
    return b.mul(picked, perRow);
  };

  Value sampled;
  if (mode == "nearest") {
    AxisTap nx = axisTap(b.unary<graph::RoundOp>(px), width);
    AxisTap ny = axisTap(b.unary<graph::RoundOp>(py), height);
    auto onesType = n.f32Tensor({batch, outH, outW});
    Value ones = graph::ConstantOp::create(n.builder, n.loc, onesType, DenseElementsAttr::get(onesType, 1.0f));
    sampled = tap(nx, ny, ones);
  } else {
    Value x0 = b.unary<graph::FloorOp>(px);
    Value y0 = b.unary<graph::FloorOp>(py);
    Value x1 = b.add(x0, b.constant(1.0f));
    Value y1 = b.add(y0, b.constant(1.0f));
    Value wx1 = b.sub(px, x0); // the share of the right column
    Value wy1 = b.sub(py, y0);
    Value wx0 = b.sub(b.constant(1.0f), wx1);
    Value wy0 = b.sub(b.constant(1.0f), wy1);
    AxisTap left = axisTap(x0, width);
    AxisTap right = axisTap(x1, width);
    AxisTap upper = axisTap(y0, height);
    AxisTap lower = axisTap(y1, height);
    Value t00 = tap(left, upper, b.mul(wx0, wy0));
    Value t10 = tap(right, upper, b.mul(wx1, wy0));
    Value t01 = tap(left, lower, b.mul(wx0, wy1));
    Value t11 = tap(right, lower, b.mul(wx1, wy1));
    Value top = b.add(t00, t10);
    Value bottom = b.add(t01, t11);
    sampled = b.add(top, bottom);
  }
  Value channelsLastOut = b.reshape(sampled, {batch, outH, outW, channels});
  n.setOutput(0, b.transpose(channelsLastOut, {0, 3, 1, 2}));
  return success();
}
