//===- CompositePatterns.cpp - ONNX ops built from graph primitives -------===//
//
// Activations, clipping, elementwise Min/Max, pooling over all positions,
// Tile, CumSum, the reductions but ReduceSum/ReduceMean/ReduceProd,
// BatchNormalization and InstanceNormalization, written with graph ops that have
// kernels and gradient rules already: relu, exp, log, tanh, scale,
// broadcasting arithmetic, reduce_sum, broadcast_to, matmul, layer_norm.
// Every backend runs them, and autodiff differentiates them, with nothing
// new to test per backend; where one fused kernel would be faster, the
// composition is still what the plan shows. The piecewise ops (LeakyRelu,
// Clip, HardSigmoid, Abs, Max, Min) use relu for their corners: at the
// corner itself their derivative is relu's, 0, where torch may take the
// other side.
//
//===----------------------------------------------------------------------===//
#include "CompositePatterns.h"
#include "Compose.h"

#include "fsdpc/Dialect/Graph/IR/GraphOps.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

namespace {

/// A scalar float operand that must be known at compile time (Clip's min
/// and max): a constant, or a one-element initializer read as a setting.
std::optional<float> constantScalar(NodeImporter &n, int i) {
  DenseElementsAttr value = n.constantInput(i);
  if (!value || value.getNumElements() != 1 || !value.getElementType().isF32())
    return n.scalarInitializer(i);
  return *value.getValues<float>().begin();
}

} // namespace

LogicalResult fsdpc::import::convertLeakyRelu(NodeImporter &n) {
  const double alpha = n.floatAttr("alpha", 0.01f);
  // relu(x) - alpha relu(-x)
  return composeUnary(n, [&](Compose &b, Value x) {
    Value positivePart = b.relu(x);
    Value negativePart = b.scale(b.relu(b.neg(x)), alpha);
    return b.sub(positivePart, negativePart);
  });
}

namespace {

/// relu(x) + alpha (exp(min(x, 0) / width) - 1), min(x, 0) = -relu(-x):
/// Elu (width 1), Celu (width alpha) and, scaled, Selu.
Value exponentialLinear(Compose &b, Value x, double alpha, double width) {
  Value expOfMin = b.exp(b.scale(b.neg(b.relu(b.neg(x))), 1.0 / width));
  Value negativePart = b.sub(expOfMin, b.constant(1.0f));
  Value positivePart = b.relu(x);
  return b.add(positivePart, b.scale(negativePart, alpha));
}

} // namespace

LogicalResult fsdpc::import::convertElu(NodeImporter &n) {
  const double alpha = n.floatAttr("alpha", 1.0f);
  return composeUnary(n, [&](Compose &b, Value x) { return exponentialLinear(b, x, alpha, 1.0); });
}

LogicalResult fsdpc::import::convertSoftplus(NodeImporter &n) {
  return composeUnary(n, [](Compose &b, Value x) { return b.softplus(x); });
}

LogicalResult fsdpc::import::convertMish(NodeImporter &n) {
  return composeUnary(n, [](Compose &b, Value x) { return b.mul(x, b.tanh(b.softplus(x))); });
}

LogicalResult fsdpc::import::convertHardSigmoid(NodeImporter &n) {
  const double alpha = n.floatAttr("alpha", 0.2f), beta = n.floatAttr("beta", 0.5f);
  return composeUnary(n, [&](Compose &b, Value x) { return b.hardSigmoid(x, alpha, beta); });
}

LogicalResult fsdpc::import::convertHardSwish(NodeImporter &n) {
  // x * relu6(x + 3) / 6, as torch's nn.Hardswish.
  return composeUnary(n, [](Compose &b, Value x) { return b.mul(x, b.hardSigmoid(x, 1.0 / 6.0, 0.5)); });
}

LogicalResult fsdpc::import::convertClip(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  std::optional<float> low, high;
  if (n.opset < 11) {
    if (n.attribute("min"))
      low = n.floatAttr("min", 0);
    if (n.attribute("max"))
      high = n.floatAttr("max", 0);
  } else {
    if (n.hasInput(1) && !(low = constantScalar(n, 1)))
      return n.fail("min must be a constant scalar");
    if (n.hasInput(2) && !(high = constantScalar(n, 2)))
      return n.fail("max must be a constant scalar");
  }
  if (low && high && *low > *high)
    return n.fail("min " + Twine(std::to_string(*low)) + " is above max " + Twine(std::to_string(*high)));
  Compose b{n};
  Value x = n.input(0), y = x;
  // low + relu(x - low) - relu(x - high); each side alone without the other.
  if (low) {
    Value lowValue = b.constant(*low);
    y = b.add(lowValue, b.relu(b.sub(x, lowValue)));
  }
  if (high) {
    Value highValue = b.constant(*high);
    y = low ? b.sub(y, b.relu(b.sub(x, highValue))) : b.sub(highValue, b.relu(b.sub(highValue, x)));
  }
  n.setOutput(0, y);
  return success();
}

LogicalResult fsdpc::import::convertRuntimeAbs(NodeImporter &n) {
  return composeUnary(n, [](Compose &b, Value x) { return b.abs(x); });
}

LogicalResult fsdpc::import::convertRuntimeMinMax(NodeImporter &n, bool isMax) {
  Compose b{n};
  Value y = n.input(0);
  // Integer operands (an index clamped to a range, as the dynamo exporter
  // writes torch's negative index wrapping): all i64, by a mask.
  bool integers = true, floats = true;
  for (int i = 0; i < n.numInputs(); ++i) {
    integers &= cast<RankedTensorType>(n.input(i).getType()).getElementType().isInteger(64);
    floats &= isF32(n.input(i));
  }
  if (!integers && !floats)
    return n.fail("inputs must all be float or all integer tensors");
  for (int i = 1; i < n.numInputs(); ++i) {
    Value x = n.input(i);
    if (failed(graph::broadcastShapes(shapeOf(y), shapeOf(x))))
      return n.fail("operands do not broadcast");
    if (integers) {
      // max(y, x) = x + (y - x) [y > x]; min(y, x) = y - (y - x) [y > x]; exact
      // in i64's wrapping arithmetic.
      // One statement per op: the IR must not depend on the order in which
      // the C++ compiler evaluates arguments.
      Value difference = b.sub(y, x);
      Value greater = b.compare(y, x, graph::ComparePredicate::gt);
      Value excess = b.mul(difference, greater);
      y = isMax ? b.add(x, excess) : b.sub(y, excess);
      continue;
    }
    // max(y, x) = x + relu(y - x); min(y, x) = y - relu(y - x)
    y = isMax ? b.add(x, b.relu(b.sub(y, x))) : b.sub(y, b.relu(b.sub(y, x)));
  }
  n.setOutput(0, y);
  return success();
}

/// LRN across channels: y = x / (bias + alpha / size * s)^beta, where s
/// sums x^2 over the `size` channels from c - floor((size - 1) / 2) to
/// c + ceil((size - 1) / 2), zeros past the ends: the squares with zero
/// channels concatenated on both sides, `size` slices of them added, and
/// the power as exp(beta * log(.)) (its base is positive for bias > 0).
LogicalResult fsdpc::import::convertLrn(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  const int64_t size = n.intAttr("size", 0);
  const float alpha = n.floatAttr("alpha", 1e-4f), beta = n.floatAttr("beta", 0.75f), bias = n.floatAttr("bias", 1.0f);
  if (shape.size() < 3)
    return n.fail("input must be [N, C, spatial...]");
  if (size < 1)
    return n.fail("size must be a positive channel count");
  if (bias <= 0)
    return n.fail("bias must be positive (the power is taken as exp(beta * log(.)))");
  const int64_t channels = shape[1], before = (size - 1) / 2, after = size - 1 - before;
  Compose b{n};
  Value squares = b.mul(x, x);
  SmallVector<Value> pieces;
  auto zeros = [&](int64_t count) {
    SmallVector<int64_t> zerosShape(shape);
    zerosShape[1] = count;
    auto type = n.f32Tensor(zerosShape);
    return graph::ConstantOp::create(n.builder, n.loc, type, DenseElementsAttr::get(type, 0.0f)).getResult();
  };
  if (before > 0)
    pieces.push_back(zeros(before));
  pieces.push_back(squares);
  if (after > 0)
    pieces.push_back(zeros(after));
  SmallVector<int64_t> paddedShape(shape);
  paddedShape[1] = channels + size - 1;
  Value padded = pieces.size() == 1 ? squares
                                    : graph::ConcatOp::create(n.builder, n.loc, n.f32Tensor(paddedShape), pieces,
                                                              n.builder.getI64IntegerAttr(1))
                                          .getResult();
  Value window;
  for (int64_t k = 0; k < size; ++k) {
    SmallVector<int64_t> starts(shape.size(), 0), steps(shape.size(), 1);
    starts[1] = k;
    Value slice = graph::SliceOp::create(n.builder, n.loc, n.f32Tensor(shape), padded,
                                         n.builder.getDenseI64ArrayAttr(starts), n.builder.getDenseI64ArrayAttr(steps));
    window = window ? b.add(window, slice) : slice;
  }
  Value scaled = b.scale(window, static_cast<double>(alpha) / static_cast<double>(size));
  Value base = b.add(scaled, b.constant(bias));
  Value logBase = b.log(base);
  Value power = b.exp(b.scale(logBase, beta));
  n.setOutput(0, b.div(x, power));
  return success();
}

LogicalResult fsdpc::import::convertGlobalAveragePool(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() < 3)
    return n.fail("input must be [N, C, spatial...]");
  SmallVector<int64_t> axes, outShape(shape.begin(), shape.begin() + 2);
  int64_t count = 1;
  for (size_t d = 2; d < shape.size(); ++d) {
    axes.push_back(d);
    outShape.push_back(1);
    count *= shape[d];
  }
  Value sum = graph::ReduceSumOp::create(n.builder, n.loc, n.f32Tensor(outShape), x,
                                         n.builder.getDenseI64ArrayAttr(axes), n.builder.getBoolAttr(true));
  n.setOutput(0, Compose{n}.scale(sum, 1.0 / static_cast<double>(count)));
  return success();
}

/// GatherElements of runtime integers (mBART's decoder start token, each
/// sample's id at its last real position): one gather from the flattened
/// data at each element's flat position, its own coordinates off the axis
/// (a constant) plus its index times the axis's stride. An index still
/// outside the axis after wrapping a negative one is moved past the data's
/// end, so that the gather reports it with the node.
static LogicalResult gatherIntegerElements(NodeImporter &n, Value data, Value indices, int64_t axis) {
  ArrayRef<int64_t> dataShape = shapeOf(data), indexShape = shapeOf(indices);
  const int64_t rank = dataShape.size();
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && indexShape[d] > dataShape[d])
      return n.fail("indices " + shapeString(indexShape) + " exceed data " + shapeString(dataShape) + " off the axis");
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dataShape[d + 1];
  const int64_t elements = product(dataShape), count = product(indexShape);
  SmallVector<int64_t> base(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, flat = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (d != axis)
        flat += (rest % indexShape[d]) * strides[d];
      rest /= indexShape[d];
    }
    base[i] = flat;
  }
  Compose b{n};
  auto i64 = [&](ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, n.builder.getI64Type()); };
  Value wrapped = b.wrapNegative(indices, {dataShape[axis]}, {});
  Value below = b.compare(wrapped, b.integer(0), graph::ComparePredicate::lt);
  Value above = b.compare(wrapped, b.integer(dataShape[axis]), graph::ComparePredicate::ge);
  Value outside = b.add(below, above);
  Value along = b.mul(wrapped, b.integer(strides[axis]));
  Value offsets = graph::ConstantOp::create(n.builder, n.loc, i64(indexShape),
                                            DenseElementsAttr::get(i64(indexShape), ArrayRef<int64_t>(base)));
  Value inRange = b.add(offsets, along);
  Value pastEnd = b.mul(outside, b.integer(elements));
  Value flat = b.add(inRange, pastEnd);
  Value flatData = b.reshape(data, {elements});
  Value flatIndex = b.reshape(flat, {count});
  Value picked =
      graph::GatherOp::create(n.builder, n.loc, i64({count}), flatData, flatIndex, n.builder.getI64IntegerAttr(0));
  n.setOutput(0, b.reshape(picked, indexShape));
  return success();
}

LogicalResult fsdpc::import::convertRuntimeGatherElements(NodeImporter &n, Value data, Value indices,
                                                          int64_t axis) {
  if (!isF32(data) && !isI64(data))
    return n.fail("GatherElements on runtime data needs float or integer data");
  if (!cast<RankedTensorType>(indices.getType()).getElementType().isInteger(64))
    return n.fail("indices must be an int64 tensor");
  ArrayRef<int64_t> dataShape = shapeOf(data), indexShape = shapeOf(indices);
  const int64_t rank = dataShape.size();
  if (isI64(data))
    return gatherIntegerElements(n, data, indices, axis);
  SmallVector<int64_t> extent(indexShape), perm, spread(indexShape);
  extent[axis] = dataShape[axis];
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis && indexShape[d] > dataShape[d])
      return n.fail("indices " + shapeString(indexShape) + " exceed data " + shapeString(dataShape) + " off the axis");
    if (d != axis)
      perm.push_back(d);
  }
  perm.push_back(axis);
  spread[axis] = 1;
  spread.push_back(dataShape[axis]);
  // out[.., i, ..] = sum_c data[.., c, ..] * (indices[.., i, ..] == c): the
  // data cut to the indices' extent off the axis, the axis moved last and
  // broadcast against the indices' one-hot rows. A negative index counts
  // from the end (plus the axis's size); one_hot reports any index still
  // outside [0, size) with the node.
  Compose b{n};
  indices = b.wrapNegative(indices, {dataShape[axis]}, {});
  Value cut = data;
  if (ArrayRef<int64_t>(extent) != dataShape)
    cut = graph::SliceOp::create(n.builder, n.loc, n.f32Tensor(extent), data,
                                 n.builder.getDenseI64ArrayAttr(SmallVector<int64_t>(rank, 0)),
                                 n.builder.getDenseI64ArrayAttr(SmallVector<int64_t>(rank, 1)));
  Value rows = b.reshape(b.transpose(cut, perm), spread);
  SmallVector<int64_t> maskShape(indexShape);
  maskShape.push_back(dataShape[axis]);
  Value mask = graph::OneHotOp::create(n.builder, n.loc, n.f32Tensor(maskShape), indices, IntegerAttr());
  n.setOutput(0, b.sum(b.mul(rows, mask), {rank}, /*keepdims=*/false));
  return success();
}

LogicalResult fsdpc::import::convertGatherND(NodeImporter &n) {
  Value data = n.input(0), indices = n.input(1);
  if (!isI64(indices))
    return n.fail("indices must be an int64 tensor");
  ArrayRef<int64_t> dataShape = shapeOf(data), indexShape = shapeOf(indices);
  const int64_t batchDims = n.intAttr("batch_dims", 0), rank = static_cast<int64_t>(dataShape.size());
  if (indexShape.empty() || batchDims < 0 || batchDims >= static_cast<int64_t>(indexShape.size()) || batchDims >= rank)
    return n.fail("batch_dims " + Twine(batchDims) + " does not fit indices " + shapeString(indexShape) + " and data " +
                  shapeString(dataShape));
  const int64_t k = indexShape.back();
  if (k < 1 || batchDims + k > rank)
    return n.fail("indices' last dimension " + Twine(k) + " names more than the data's " + Twine(rank - batchDims) +
                  " dimensions after the batch ones");
  for (int64_t d = 0; d < batchDims; ++d)
    if (indexShape[d] != dataShape[d])
      return n.fail("indices " + Twine(shapeString(indexShape)) + " and data " + shapeString(dataShape) +
                    " differ in a batch dimension");
  // The data as rows: its batch and indexed dimensions flattened into one,
  // the rest kept. Each index tuple becomes the row it names: the batch
  // rows' offset (from the tuple's place, a constant) plus the tuple's
  // coordinates times their strides, a negative one counted from the end.
  // A constant index folds to its row; a runtime one is computed in i64.
  const int64_t batchCount = product(dataShape.take_front(batchDims));
  ArrayRef<int64_t> named = dataShape.slice(batchDims, k);
  const int64_t namedCount = product(named);
  SmallVector<int64_t> strides(k, 1);
  for (int64_t j = k - 2; j >= 0; --j)
    strides[j] = strides[j + 1] * named[j + 1];
  const int64_t tuples = product(indexShape.drop_back());
  const int64_t perBatch = tuples / std::max<int64_t>(batchCount, 1);
  SmallVector<int64_t> rowsShape{batchCount * namedCount};
  rowsShape.append(dataShape.begin() + batchDims + k, dataShape.end());
  SmallVector<int64_t> tupleShape(indexShape.drop_back());
  SmallVector<int64_t> outShape(tupleShape);
  outShape.append(rowsShape.begin() + 1, rowsShape.end());
  SmallVector<int64_t> picked;
  DenseElementsAttr constantIndices = n.constantInput(1);
  if (constantIndices) {
    SmallVector<int64_t> constant(constantIndices.getValues<int64_t>());
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t at = (t / perBatch) * namedCount;
      for (int64_t j = 0; j < k; ++j) {
        int64_t coordinate = constant[t * k + j];
        if (coordinate < -named[j] || coordinate >= named[j])
          return n.fail("index " + Twine(coordinate) + " is out of range for a dimension of " + Twine(named[j]));
        at += (coordinate < 0 ? coordinate + named[j] : coordinate) * strides[j];
      }
      picked.push_back(at);
    }
    // Constant data and indices (an integer table, say) fold.
    if (DenseElementsAttr table = n.constantInput(0)) {
      SmallVector<Attribute> all(table.getValues<Attribute>()), out;
      const int64_t rowSize = product(ArrayRef<int64_t>(rowsShape).drop_front());
      for (int64_t at : picked)
        out.append(all.begin() + at * rowSize, all.begin() + (at + 1) * rowSize);
      n.setFoldedOutput(0, DenseElementsAttr::get(RankedTensorType::get(outShape, table.getElementType()), out));
      return success();
    }
  }
  if (!isF32(data))
    return n.fail("GatherND of runtime data needs float data");
  Compose b{n};
  Value rows = b.reshape(data, rowsShape);
  Value row;
  if (constantIndices) {
    auto type = RankedTensorType::get(tupleShape, n.builder.getI64Type());
    row = graph::ConstantOp::create(n.builder, n.loc, type, DenseElementsAttr::get(type, ArrayRef<int64_t>(picked)));
  } else {
    auto integers = [&](ArrayRef<int64_t> values, ArrayRef<int64_t> shape) -> Value {
      auto type = RankedTensorType::get(shape, n.builder.getI64Type());
      return graph::ConstantOp::create(n.builder, n.loc, type, DenseElementsAttr::get(type, values));
    };
    // coordinate + size where it is negative, times its stride, summed
    // over the tuple's k coordinates (columns of the last dimension).
    Value normalized = b.wrapNegative(indices, named, {k});
    SmallVector<int64_t> columnShape(indexShape);
    columnShape.back() = 1;
    const int64_t last = static_cast<int64_t>(indexShape.size()) - 1;
    auto columnType = RankedTensorType::get(columnShape, n.builder.getI64Type());
    for (int64_t j = 0; j < k; ++j) {
      SmallVector<int64_t> starts(indexShape.size(), 0), steps(indexShape.size(), 1);
      starts[last] = j;
      Value column =
          k == 1 ? normalized
                 : graph::SliceOp::create(n.builder, n.loc, columnType, normalized,
                                          n.builder.getDenseI64ArrayAttr(starts), n.builder.getDenseI64ArrayAttr(steps))
                       .getResult();
      Value term = b.reshape(strides[j] == 1 ? column : b.mul(column, b.integer(strides[j])), tupleShape);
      row = row ? b.add(row, term) : term;
    }
    if (batchDims > 0) {
      SmallVector<int64_t> offsets;
      for (int64_t t = 0; t < tuples; ++t)
        offsets.push_back((t / perBatch) * namedCount);
      row = b.add(row, integers(offsets, tupleShape));
    }
  }
  n.setOutput(
      0, graph::GatherOp::create(n.builder, n.loc, n.f32Tensor(outShape), rows, row, n.builder.getI64IntegerAttr(0)));
  return success();
}

/// ScatterND as a scatter-add of the updates' rows into the data's leading
/// k dimensions: gather_grad of the updates [count, inner] at the flat row
/// indices gives S [rows, inner]; reduction add is data + S, none (an
/// overwrite) is data * (1 - written) + S, where `written` marks the rows
/// the indices name (a constant for constant indices, else from their
/// one_hot rows).
///
/// Integer tensors (a decoder's input ids: the ids shifted one place right
/// into zeros, the start token written before them) with constant indices
/// and no reduction: each output row is a known row of the data or of the
/// updates, so one gather from their rows, concatenated, picks it.
LogicalResult fsdpc::import::convertScatterND(NodeImporter &n) {
  Value data = n.input(0), indices = n.input(1), updates = n.input(2);
  const bool integers = isI64(data) && isI64(updates);
  if (!integers && (!isF32(data) || !isF32(updates)))
    return n.fail("data and updates must be float tensors, or both integer tensors");
  if (!indices || !cast<RankedTensorType>(indices.getType()).getElementType().isInteger(64))
    return n.fail("indices must be an int64 tensor");
  const std::string reduction = n.stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return n.fail("reduction '" + reduction + "' is not supported (none and add are)");
  if (integers && (reduction != "none" || !n.constantInput(1)))
    return n.fail("integer data takes constant indices and no reduction");
  ArrayRef<int64_t> dataShape = shapeOf(data), indexShape = shapeOf(indices);
  if (indexShape.empty() || indexShape.back() < 1 || indexShape.back() > static_cast<int64_t>(dataShape.size()))
    return n.fail("indices must be [..., k] with k from 1 to the data's rank");
  const int64_t k = indexShape.back();
  SmallVector<int64_t> updateShape(indexShape.drop_back());
  updateShape.append(dataShape.begin() + k, dataShape.end());
  if (shapeOf(updates) != ArrayRef<int64_t>(updateShape))
    return n.fail("updates must have shape " + shapeString(updateShape));
  const int64_t rows = product(dataShape.take_front(k)), inner = product(dataShape.drop_front(k)),
                count = product(indexShape.drop_back());
  Compose b{n};
  auto flatType = RankedTensorType::get({count}, n.builder.getI64Type());
  Value flat;
  std::optional<SmallVector<int64_t>> written;
  if (DenseElementsAttr constant = n.constantInput(1)) {
    SmallVector<int64_t> values(constant.getValues<int64_t>()), rowsIndex;
    written = SmallVector<int64_t>(rows, 0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t row = 0;
      for (int64_t d = 0; d < k; ++d) {
        int64_t index = values[i * k + d];
        index += index < 0 ? dataShape[d] : 0;
        if (index < 0 || index >= dataShape[d])
          return n.fail("index " + Twine(values[i * k + d]) + " is out of range for dimension " + Twine(d) +
                        " of size " + Twine(dataShape[d]));
        row = row * dataShape[d] + index;
      }
      rowsIndex.push_back(row);
      (*written)[row] = 1;
    }
    if (integers) {
      // Row r of the output: update i's row where the last write to r is
      // update i, else the data's row r.
      SmallVector<int64_t> source(rows);
      for (int64_t r = 0; r < rows; ++r)
        source[r] = r;
      for (int64_t i = 0; i < count; ++i)
        source[rowsIndex[i]] = rows + i;
      return scatterIntegerRows(n, data, updates, source, inner);
    }
    // Everything known (BART's decoder writes its causal mask into an
    // expanded buffer so): the result is a constant, which graph-fuse can
    // read as a mask.
    DenseElementsAttr constantData = n.constantInput(0), constantUpdates = n.constantInput(2);
    if (constantData && constantUpdates) {
      SmallVector<float> out(constantData.getValues<float>()), rowsOfUpdates(constantUpdates.getValues<float>());
      for (int64_t i = 0; i < count; ++i)
        for (int64_t c = 0; c < inner; ++c) {
          float &element = out[rowsIndex[i] * inner + c];
          const float update = rowsOfUpdates[i * inner + c];
          element = reduction == "add" ? element + update : update;
        }
      n.setFoldedOutput(0, DenseElementsAttr::get(n.f32Tensor(dataShape), ArrayRef<float>(out)));
      return success();
    }
    // Every row overwritten once, row i by update i (transformers'
    // masked_fill of a mask's whole [:, :, :T, :T] slice, as OPT, GPT-J and
    // CodeGen export it): the output is the updates themselves, and the
    // data is not read. That keeps the mask's formula in sight of
    // graph-fuse.
    bool inOrder = reduction == "none" && count == rows;
    for (int64_t i = 0; inOrder && i < count; ++i)
      inOrder = rowsIndex[i] == i;
    if (inOrder) {
      n.setOutput(0, b.reshape(updates, dataShape));
      return success();
    }
    flat = graph::ConstantOp::create(n.builder, n.loc, flatType, DenseElementsAttr::get(flatType, ArrayRef<int64_t>(rowsIndex)));
  } else if (k == 1) {
    flat = b.reshape(indices, {count});
  } else {
    return n.fail("indices must be constant when they index more than one dimension");
  }
  Value scattered = graph::GatherGradOp::create(n.builder, n.loc, n.f32Tensor({rows, inner}),
                                                b.reshape(updates, {count, inner}), flat,
                                                n.builder.getI64IntegerAttr(0));
  Value rowsOf = b.reshape(data, {rows, inner});
  Value out;
  if (reduction == "add") {
    out = b.add(rowsOf, scattered);
  } else {
    Value kept;
    if (written) {
      SmallVector<float> keep;
      for (int64_t w : *written)
        keep.push_back(w ? 0.0f : 1.0f);
      auto keepType = n.f32Tensor({rows, 1});
      kept = graph::ConstantOp::create(n.builder, n.loc, keepType, DenseElementsAttr::get(keepType, ArrayRef<float>(keep)));
    } else {
      // 1 - min(times written, 1) per row.
      Value hits = b.sum(graph::OneHotOp::create(n.builder, n.loc, n.f32Tensor({count, rows}), flat, IntegerAttr()),
                         {0}, /*keepdims=*/false);
      kept = b.reshape(b.relu(b.sub(b.constant(1.0f), hits)), {rows, 1});
    }
    out = b.add(b.mul(rowsOf, kept), scattered);
  }
  n.setOutput(0, b.reshape(out, dataShape));
  return success();
}

LogicalResult fsdpc::import::scatterIntegerRows(NodeImporter &n, Value data, Value updates, ArrayRef<int64_t> source,
                                                int64_t inner) {
  Compose b{n};
  const int64_t rows = static_cast<int64_t>(source.size()), updateRows = product(shapeOf(updates)) / inner;
  auto i64 = [&](ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, n.builder.getI64Type()); };
  Value sourceRows =
      graph::ConstantOp::create(n.builder, n.loc, i64({rows}), DenseElementsAttr::get(i64({rows}), source));
  Value both =
      graph::ConcatOp::create(n.builder, n.loc, i64({rows + updateRows, inner}),
                              ValueRange{b.reshape(data, {rows, inner}), b.reshape(updates, {updateRows, inner})},
                              n.builder.getI64IntegerAttr(0));
  Value picked =
      graph::GatherOp::create(n.builder, n.loc, i64({rows, inner}), both, sourceRows, n.builder.getI64IntegerAttr(0));
  n.setOutput(0, b.reshape(picked, shapeOf(data)));
  return success();
}

LogicalResult fsdpc::import::convertTile(NodeImporter &n) {
  Value x = n.input(0);
  DenseElementsAttr repeatsAttr = n.constantInput(1);
  if (!x || !repeatsAttr || !repeatsAttr.getElementType().isInteger(64))
    return n.fail("repeats must be a constant");
  SmallVector<int64_t> repeats(repeatsAttr.getValues<int64_t>());
  ArrayRef<int64_t> shape = shapeOf(x);
  if (repeats.size() != shape.size())
    return n.fail("repeats has " + Twine(repeats.size()) + " entries for rank " + Twine(shape.size()));
  // [d0, d1] -> [1, d0, 1, d1] -> broadcast [r0, d0, r1, d1] -> [r0 d0, r1 d1]
  SmallVector<int64_t> interleaved, broadcast, result;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (repeats[d] < 0)
      return n.fail("repeats must not be negative");
    interleaved.append({1, shape[d]});
    broadcast.append({repeats[d], shape[d]});
    result.push_back(repeats[d] * shape[d]);
  }
  Compose b{n};
  Type element = cast<RankedTensorType>(x.getType()).getElementType();
  Value spread = graph::BroadcastToOp::create(n.builder, n.loc, RankedTensorType::get(broadcast, element),
                                              b.reshape(x, interleaved));
  n.setOutput(0, b.reshape(spread, result));
  return success();
}

/// CumSum of an i64 tensor (RoBERTa's position ids, a cumulative count of
/// the tokens that are not padding) as a Hillis-Steele scan: log2(size)
/// rounds, each adding the running sums shifted by 1, 2, 4, ... places along
/// the axis (zeros shifted in), exact in i64. Exclusive shifts the input by
/// one place first; reverse shifts the other way.
static Value integerCumSum(NodeImporter &n, Value x, int64_t axis, bool exclusive, bool reverse) {
  Compose b{n};
  ArrayRef<int64_t> shape = shapeOf(x);
  const int64_t size = shape[axis];
  // `v` moved `by` places toward the end (toward the start if reverse),
  // zeros filling the places it leaves.
  auto shifted = [&](Value v, int64_t by) -> Value {
    if (by >= size) { // everything shifted out (an exclusive sum over one place)
      auto type = cast<RankedTensorType>(x.getType());
      return graph::ConstantOp::create(n.builder, n.loc, type,
                                       DenseElementsAttr::get(type, n.builder.getI64IntegerAttr(0)));
    }
    SmallVector<int64_t> kept(shape), zerosShape(shape), starts(shape.size(), 0), steps(shape.size(), 1);
    kept[axis] = size - by;
    zerosShape[axis] = by;
    if (reverse)
      starts[axis] = by;
    auto keptType = RankedTensorType::get(kept, n.builder.getI64Type());
    Value part = graph::SliceOp::create(n.builder, n.loc, keptType, v, n.builder.getDenseI64ArrayAttr(starts),
                                        n.builder.getDenseI64ArrayAttr(steps));
    auto zerosType = RankedTensorType::get(zerosShape, n.builder.getI64Type());
    Value zeros = graph::ConstantOp::create(n.builder, n.loc, zerosType,
                                            DenseElementsAttr::get(zerosType, n.builder.getI64IntegerAttr(0)));
    SmallVector<Value> pieces = reverse ? SmallVector<Value>{part, zeros} : SmallVector<Value>{zeros, part};
    return graph::ConcatOp::create(n.builder, n.loc, cast<RankedTensorType>(x.getType()), pieces,
                                   n.builder.getI64IntegerAttr(axis));
  };
  Value sums = exclusive ? shifted(x, 1) : x;
  for (int64_t by = 1; by < size; by *= 2)
    sums = b.add(sums, shifted(sums, by));
  return sums;
}

/// ReduceSum of an i64 tensor (mBART counts each sample's tokens that are
/// not padding to find its last one): along each reduced axis, the first
/// half of the places added to the second, ceil(log2(size)) rounds with an
/// odd place carried over, exact in i64.
LogicalResult fsdpc::import::convertIntegerReduceSum(NodeImporter &n) {
  FailureOr<ReductionLayout> layout = reductionLayout(n);
  if (failed(layout))
    return failure();
  Compose b{n};
  Value sums = n.input(0);
  if (layout->identity) {
    n.setOutput(0, sums);
    return success();
  }
  auto slice = [&](Value v, int64_t axis, int64_t start, int64_t count) -> Value {
    SmallVector<int64_t> shape(shapeOf(v)), starts(shape.size(), 0), steps(shape.size(), 1);
    shape[axis] = count;
    starts[axis] = start;
    return graph::SliceOp::create(n.builder, n.loc, RankedTensorType::get(shape, n.builder.getI64Type()), v,
                                  n.builder.getDenseI64ArrayAttr(starts), n.builder.getDenseI64ArrayAttr(steps));
  };
  for (int64_t axis : layout->axes) {
    for (int64_t size = shapeOf(sums)[axis]; size > 1; size = (size + 1) / 2) {
      const int64_t half = size / 2;
      // One op per statement: the IR must not depend on the order in
      // which the C++ compiler evaluates arguments.
      Value first = slice(sums, axis, 0, half);
      Value second = slice(sums, axis, half, half);
      Value added = b.add(first, second);
      if (size % 2) {
        SmallVector<int64_t> joined(shapeOf(added));
        joined[axis] = half + 1;
        Value carried = slice(sums, axis, size - 1, 1);
        added = graph::ConcatOp::create(n.builder, n.loc, RankedTensorType::get(joined, n.builder.getI64Type()),
                                        ValueRange{added, carried}, n.builder.getI64IntegerAttr(axis));
      }
      sums = added;
    }
    if (shapeOf(sums)[axis] == 0) { // a sum over no places is 0
      SmallVector<int64_t> one(shapeOf(sums));
      one[axis] = 1;
      auto type = RankedTensorType::get(one, n.builder.getI64Type());
      sums = graph::ConstantOp::create(n.builder, n.loc, type,
                                       DenseElementsAttr::get(type, n.builder.getI64IntegerAttr(0)));
    }
  }
  n.setOutput(0, b.reshape(sums, layout->resultShape));
  return success();
}

LogicalResult fsdpc::import::convertCumSum(NodeImporter &n) {
  if (!isI64(n.input(0)) && failed(requireFloatInputs(n, 1)))
    return failure();
  DenseElementsAttr axisAttr = n.constantInput(1);
  if (!axisAttr || axisAttr.getNumElements() != 1 || !axisAttr.getElementType().isInteger(64))
    return n.fail("axis must be a constant scalar");
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  const int64_t rank = shape.size();
  int64_t axis = *axisAttr.getValues<int64_t>().begin();
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank)
    return n.fail("axis is out of range");
  const bool exclusive = n.intAttr("exclusive", 0), reverse = n.intAttr("reverse", 0);
  if (isI64(x)) {
    n.setOutput(0, integerCumSum(n, x, axis, exclusive, reverse));
    return success();
  }
  const int64_t size = shape[axis];
  // y = x T along the axis, T[i][j] = 1 where input i adds into output j.
  SmallVector<float> triangle(size * size, 0.0f);
  for (int64_t i = 0; i < size; ++i)
    for (int64_t j = 0; j < size; ++j) {
      bool adds = reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
      triangle[i * size + j] = adds ? 1.0f : 0.0f;
    }
  auto triangleType = n.f32Tensor({size, size});
  Value t = graph::ConstantOp::create(n.builder, n.loc, triangleType,
                                      DenseElementsAttr::get(triangleType, ArrayRef<float>(triangle)));
  // Move the axis last, multiply, move it back.
  const SmallVector<int64_t> perm = axisLastPermutation(rank, axis), inverse = inversePermutation(perm);
  SmallVector<int64_t> moved;
  for (int64_t d : perm)
    moved.push_back(shape[d]);
  Value last = x;
  if (axis != rank - 1)
    last = graph::TransposeOp::create(n.builder, n.loc, n.f32Tensor(moved), x, n.builder.getDenseI64ArrayAttr(perm));
  Value summed = rank == 1 ? Compose{n}.reshape(
                                 graph::MatmulOp::create(n.builder, n.loc, n.f32Tensor({1, size}),
                                                         Compose{n}.reshape(last, {1, size}), t, false, false),
                                 {size})
                           : graph::MatmulOp::create(n.builder, n.loc, n.f32Tensor(moved), last, t, false, false)
                                 .getResult();
  if (axis != rank - 1)
    summed = graph::TransposeOp::create(n.builder, n.loc, n.f32Tensor(shape), summed,
                                        n.builder.getDenseI64ArrayAttr(inverse));
  n.setOutput(0, summed);
  return success();
}

LogicalResult fsdpc::import::convertComposedReduction(NodeImporter &n, ComposedReduction kind) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  FailureOr<ReductionLayout> layout = reductionLayout(n);
  if (failed(layout))
    return failure();
  Compose b{n};
  Value x = n.input(0);
  auto maxOver = [&](Value v) {
    for (int64_t axis : layout->axes)
      v = b.maxAlong(v, axis);
    return v;
  };
  auto productOver = [&](Value v) {
    for (int64_t axis : layout->axes)
      v = b.productAlong(v, axis);
    return v;
  };
  // Each is written with the reduced dimensions kept; a reduction over no
  // axes (noop_with_empty_axes) keeps only its elementwise part.
  Value y;
  switch (kind) {
  case ComposedReduction::kMax:
    y = maxOver(x);
    break;
  case ComposedReduction::kMin:
    y = b.neg(maxOver(b.neg(x)));
    break;
  case ComposedReduction::kSumSquare:
    y = layout->identity ? b.mul(x, x) : b.sumOver(b.mul(x, x), *layout);
    break;
  case ComposedReduction::kL1:
    y = layout->identity ? b.abs(x) : b.sumOver(b.abs(x), *layout);
    break;
  case ComposedReduction::kL2:
    y = layout->identity ? b.abs(x)
                         : graph::SqrtOp::create(n.builder, n.loc, b.sumOver(b.mul(x, x), *layout)).getResult();
    break;
  case ComposedReduction::kLogSum:
    y = b.log(layout->identity ? x : b.sumOver(x, *layout));
    break;
  case ComposedReduction::kLogSumExp: {
    if (layout->identity) {
      y = x;
      break;
    }
    // log(sum(exp(x - m))) + m with m the max: no overflow; the gradient
    // through m cancels (its two terms are -1 and +1).
    Value m = maxOver(x);
    y = b.add(b.log(b.sumOver(b.exp(b.sub(x, m)), *layout)), m);
    break;
  }
  case ComposedReduction::kProd:
    y = productOver(x);
    break;
  }
  n.setOutput(0, layout->identity ? y : b.reshape(y, layout->resultShape));
  return success();
}

LogicalResult fsdpc::import::convertReduceProd(NodeImporter &n) {
  DenseElementsAttr value = n.constantInput(0);
  if (!value || !value.getElementType().isInteger(64))
    return convertComposedReduction(n, ComposedReduction::kProd);
  FailureOr<ReductionLayout> layout = reductionLayout(n);
  if (failed(layout))
    return failure();
  // Each element multiplies into its place in the kept shape, which
  // broadcasts back to the input's: the place broadcasting reads it from.
  ArrayRef<int64_t> shape = value.getType().getShape();
  SmallVector<int64_t> products(product(layout->keptShape), 1);
  for (auto [i, element] : llvm::enumerate(value.getValues<int64_t>()))
    products[broadcastSourceIndex(layout->keptShape, shape, static_cast<int64_t>(i))] *= element;
  n.setFoldedOutput(0, DenseElementsAttr::get(RankedTensorType::get(layout->resultShape, value.getElementType()),
                                              ArrayRef<int64_t>(products)));
  return success();
}

LogicalResult fsdpc::import::convertMeanVarianceNormalization(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  const int64_t rank = static_cast<int64_t>(shapeOf(x).size());
  SmallVector<int64_t> axes = n.intsAttr("axes").value_or(SmallVector<int64_t>{0, 2, 3});
  int64_t count = 1;
  for (int64_t &axis : axes) {
    FailureOr<int64_t> normalized = axisIn(n, axis, rank);
    if (failed(normalized))
      return failure();
    axis = *normalized;
    count *= shapeOf(x)[axis];
  }
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return n.fail("axes repeat an axis");
  // (x - mean) / (std + 1e-9), ONNX's function, with the variance taken of
  // the centered values (E[x^2] - E[x]^2 cancels where the mean is large).
  Compose b{n};
  Value mean = b.scale(b.sum(x, axes, true), 1.0 / static_cast<double>(count));
  Value centered = b.sub(x, mean);
  Value variance = b.scale(b.sum(b.mul(centered, centered), axes, true), 1.0 / static_cast<double>(count));
  Value deviation = b.unary<graph::SqrtOp>(variance);
  n.setOutput(0, b.div(centered, b.add(deviation, b.constant(1e-9f))));
  return success();
}

LogicalResult fsdpc::import::convertLpNormalization(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  FailureOr<int64_t> axis = axisIn(n, n.intAttr("axis", -1), shapeOf(x).size());
  if (failed(axis))
    return failure();
  const int64_t p = n.intAttr("p", 2);
  if (p != 1 && p != 2)
    return n.fail("p must be 1 or 2, got " + Twine(p));
  // x / ||x||_p along the axis, no epsilon (ONNX's definition; a zero
  // vector gives NaN, as there).
  Compose b{n};
  Value norm = p == 1 ? b.sum(b.abs(x), {*axis}, true) : b.unary<graph::SqrtOp>(b.sum(b.mul(x, x), {*axis}, true));
  n.setOutput(0, b.div(x, norm));
  return success();
}

LogicalResult fsdpc::import::convertBatchNormalization(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 5)))
    return failure();
  Value x = n.input(0), scale = n.input(1), bias = n.input(2), runningMean = n.input(3), runningVar = n.input(4);
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() < 2)
    return n.fail("input must be [N, C, spatial...]");
  const int64_t channels = shape[1];
  for (Value v : {scale, bias, runningMean, runningVar})
    if (shapeOf(v) != ArrayRef<int64_t>{channels})
      return n.fail("scale, B, input_mean and input_var must be [C] with C = " + Twine(channels));
  // Opsets 9 to 13 say training by asking for the statistics outputs;
  // 14 and later by training_mode.
  const bool training = n.opset >= 14 ? n.intAttr("training_mode", 0) != 0 : n.node.output_size() > 1;
  const double epsilon = n.floatAttr("epsilon", 1e-5f);
  const double momentum = n.floatAttr("momentum", 0.9f);
  Compose b{n};
  SmallVector<int64_t> channelShape(shape.size(), 1);
  channelShape[1] = channels;
  auto perChannel = [&](Value v) { return b.reshape(v, channelShape); };

  if (!training) {
    // y = x * a + (B - mean * a) with a = scale / sqrt(var + epsilon).
    Value inverseStd = graph::ReciprocalOp::create(
        n.builder, n.loc,
        graph::SqrtOp::create(n.builder, n.loc, b.add(runningVar, b.constant(static_cast<float>(epsilon)))));
    Value a = b.mul(scale, inverseStd);
    Value shift = b.sub(bias, b.mul(runningMean, a));
    Value scaled = b.mul(x, perChannel(a));
    n.setOutput(0, b.add(scaled, perChannel(shift)));
    return success();
  }

  // Each channel normalised over the batch and every position: layer_norm
  // on [C, N * S], whose mean and inverse standard deviation are the batch
  // statistics, then the per-channel affine.
  int64_t spatial = 1;
  for (size_t d = 2; d < shape.size(); ++d)
    spatial *= shape[d];
  const int64_t count = shape[0] * spatial;
  auto swapFirstTwo = [&](Value v, ArrayRef<int64_t> to) -> Value {
    return graph::TransposeOp::create(n.builder, n.loc, n.f32Tensor(to), v, n.builder.getDenseI64ArrayAttr({1, 0, 2}));
  };
  Value channelsFirst =
      b.reshape(swapFirstTwo(b.reshape(x, {shape[0], channels, spatial}), {channels, shape[0], spatial}),
                {channels, count});
  auto unitType = n.f32Tensor({count});
  Value ones = graph::ConstantOp::create(n.builder, n.loc, unitType, DenseElementsAttr::get(unitType, 1.0f));
  Value zeros = graph::ConstantOp::create(n.builder, n.loc, unitType, DenseElementsAttr::get(unitType, 0.0f));
  auto statType = n.f32Tensor({channels, 1});
  auto norm = graph::LayerNormOp::create(n.builder, n.loc, n.f32Tensor({channels, count}), statType, statType,
                                         channelsFirst, ones, zeros, n.builder.getI64IntegerAttr(1),
                                         n.builder.getF64FloatAttr(epsilon));
  Value normalized =
      b.reshape(swapFirstTwo(b.reshape(norm.getResult(), {channels, shape[0], spatial}), {shape[0], channels, spatial}),
                shape);
  Value scaled = b.mul(normalized, perChannel(scale));
  n.setOutput(0, b.add(scaled, perChannel(bias)));

  // The batch statistics: the mean, and the biased variance 1 / rstd^2 - epsilon.
  Value mean = b.reshape(norm.getMean(), {channels});
  Value rstd = b.reshape(norm.getInvStdDev(), {channels});
  // One statement per op: the order of nested arguments' evaluation is
  // the compiler's choice, and the IR must not depend on it.
  Value inverseSquare = graph::ReciprocalOp::create(n.builder, n.loc, b.mul(rstd, rstd));
  Value variance = b.sub(inverseSquare, b.constant(static_cast<float>(epsilon)));
  auto blend = [&](Value running, Value batch, double batchFactor) {
    Value kept = b.scale(running, momentum);
    Value added = b.scale(batch, batchFactor);
    return b.add(kept, added);
  };
  // The statistics outputs follow the ONNX definition (biased variance).
  Value newMean = blend(runningMean, mean, 1.0 - momentum);
  n.setOutput(1, newMean);
  if (n.wantsOutput(2))
    n.setOutput(2, blend(runningVar, variance, 1.0 - momentum));
  n.setOutput(3, mean);
  n.setOutput(4, variance);
  // The buffers are updated as torch's BatchNorm updates them in training,
  // which the export leaves out: the running variance blends in the
  // unbiased batch variance.
  if (n.isBufferInput(3))
    n.updateBuffer(3, newMean);
  if (n.isBufferInput(4)) {
    double bessel = count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
    n.updateBuffer(4, blend(runningVar, variance, (1.0 - momentum) * bessel));
  }
  return success();
}

namespace {

/// x [N, C, spatial...] normalised per sample over each of `groups` groups
/// of channels and their positions (a layer_norm on [N, G, C/G * S] over
/// the last axis, without its own affine), then scaled and shifted per
/// group (scale and bias [G]) or per channel ([C]).
Value groupNorm(Compose &b, Value x, int64_t groups, Value scale, Value bias, double epsilon) {
  NodeImporter &n = b.n;
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t spatial = 1;
  for (size_t d = 2; d < shape.size(); ++d)
    spatial *= shape[d];
  const int64_t batch = shape[0], channels = shape[1], width = channels / groups * spatial;
  auto unitType = n.f32Tensor({width});
  Value ones = graph::ConstantOp::create(n.builder, n.loc, unitType, DenseElementsAttr::get(unitType, 1.0f));
  Value zeros = graph::ConstantOp::create(n.builder, n.loc, unitType, DenseElementsAttr::get(unitType, 0.0f));
  auto statType = n.f32Tensor({batch, groups, 1});
  auto norm = graph::LayerNormOp::create(n.builder, n.loc, n.f32Tensor({batch, groups, width}), statType, statType,
                                         b.reshape(x, {batch, groups, width}), ones, zeros,
                                         n.builder.getI64IntegerAttr(2), n.builder.getF64FloatAttr(epsilon));
  Value y = norm.getResult();
  if (shapeOf(scale)[0] == groups && groups != channels) {
    y = b.mul(y, b.reshape(scale, {groups, 1}));
    y = b.add(y, b.reshape(bias, {groups, 1}));
    return b.reshape(y, shape);
  }
  SmallVector<int64_t> channelShape(shape.size(), 1);
  channelShape[1] = channels;
  y = b.reshape(y, shape);
  y = b.mul(y, b.reshape(scale, channelShape));
  return b.add(y, b.reshape(bias, channelShape));
}

} // namespace

LogicalResult fsdpc::import::convertInstanceNormalization(NodeImporter &n) {
  if (!isF32(n.input(0)) || !isF32(n.input(1)) || !isF32(n.input(2)))
    return n.fail("input, scale and B must be float tensors");
  ArrayRef<int64_t> shape = shapeOf(n.input(0));
  if (shape.size() < 3 || shapeOf(n.input(1)) != ArrayRef<int64_t>{shape[1]} ||
      shapeOf(n.input(2)) != ArrayRef<int64_t>{shape[1]})
    return n.fail("input must be [N, C, spatial...] with scale and B of [C]");
  // Each (sample, channel) normalised over its positions: one group per channel.
  Compose b{n};
  n.setOutput(0, groupNorm(b, n.input(0), shape[1], n.input(1), n.input(2), n.floatAttr("epsilon", 1e-5f)));
  return success();
}

LogicalResult fsdpc::import::convertGroupNormalization(NodeImporter &n) {
  if (!isF32(n.input(0)) || !isF32(n.input(1)) || !isF32(n.input(2)))
    return n.fail("X, scale and bias must be float tensors");
  ArrayRef<int64_t> shape = shapeOf(n.input(0));
  const int64_t groups = n.intAttr("num_groups", 0);
  if (shape.size() < 3 || groups <= 0 || shape[1] % groups != 0)
    return n.fail("X must be [N, C, spatial...] with C divisible by num_groups " + Twine(groups));
  // Opset 18 scales per group, opset 21 per channel.
  const int64_t affine = n.opset >= 21 ? shape[1] : groups;
  if (shapeOf(n.input(1)) != ArrayRef<int64_t>{affine} || shapeOf(n.input(2)) != ArrayRef<int64_t>{affine})
    return n.fail("scale and bias must be [" + Twine(affine) + "] at opset " + Twine(n.opset));
  if (n.opset >= 21 && n.intAttr("stash_type", 1) != 1)
    return n.fail("stash_type must be 1 (float statistics)");
  Compose b{n};
  n.setOutput(0, groupNorm(b, n.input(0), groups, n.input(1), n.input(2), n.floatAttr("epsilon", 1e-5f)));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling, as gathered patches
//===----------------------------------------------------------------------===//
//
// x [N, C, D1..Dk] is flattened to [N, C, S] with one extra slot holding the
// padding value, 0 (MaxPool's padding reads an element of its own window
// instead, which leaves the max as it is). A constant
// index tensor picks, for every output position p and kernel offset j, the
// input element it reads, or the padding slot: patches [N, C, P, K]. Conv is
// then a (grouped) batch matmul with the weight, pooling a sum or a max over
// K. gather_grad scatters the gradient back, so every backend trains it
// with kernels it has; the patches take K times the input's memory.

namespace {

struct Window {
  SmallVector<int64_t> input, kernel, strides, dilations, padBegin, padEnd, output;
  int64_t positions = 1, offsets = 1, slots = 1; // P, K, S
};

/// The window geometry of a Conv or pooling node, or failure with the
/// node's error.
FailureOr<Window> windowOf(NodeImporter &n, ArrayRef<int64_t> inputShape, ArrayRef<int64_t> kernel, bool ceilMode) {
  Window w;
  const size_t k = kernel.size();
  w.input.assign(inputShape.begin() + 2, inputShape.end());
  w.kernel.assign(kernel.begin(), kernel.end());
  auto ints = [&](StringRef name, int64_t fallback) {
    std::optional<SmallVector<int64_t>> given = n.intsAttr(name);
    return given ? *given : SmallVector<int64_t>(k, fallback);
  };
  w.strides = ints("strides", 1);
  w.dilations = ints("dilations", 1);
  SmallVector<int64_t> pads = ints("pads", 0);
  if (pads.size() == k)
    pads.append(pads.begin(), pads.end());
  if (w.strides.size() != k || w.dilations.size() != k || pads.size() != 2 * k)
    return n.fail("strides, dilations and pads must have one entry per spatial dimension");
  std::string autoPad = n.stringAttr("auto_pad", "NOTSET");
  for (size_t i = 0; i < k; ++i) {
    if (w.strides[i] <= 0 || w.dilations[i] <= 0 || w.kernel[i] <= 0)
      return n.fail("strides, dilations and kernel sizes must be positive");
    const int64_t span = w.dilations[i] * (w.kernel[i] - 1) + 1;
    int64_t begin = pads[i], end = pads[i + k];
    if (autoPad == "VALID") {
      begin = end = 0;
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      const int64_t out = (w.input[i] + w.strides[i] - 1) / w.strides[i];
      const int64_t total = std::max<int64_t>((out - 1) * w.strides[i] + span - w.input[i], 0);
      begin = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else if (autoPad != "NOTSET") {
      return n.fail("auto_pad '" + autoPad + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
    }
    const int64_t room = w.input[i] + begin + end - span;
    int64_t out = (ceilMode ? (room + w.strides[i] - 1) / w.strides[i] : room / w.strides[i]) + 1;
    // A window that would start in the end padding alone is dropped, as
    // torch does with ceil_mode.
    if (ceilMode && (out - 1) * w.strides[i] >= w.input[i] + begin)
      --out;
    if (room < 0 || out <= 0)
      return n.fail("the window does not fit in the input");
    w.padBegin.push_back(begin);
    w.padEnd.push_back(end);
    w.output.push_back(out);
    w.positions *= out;
    w.offsets *= w.kernel[i];
    w.slots *= w.input[i];
  }
  return w;
}

/// For every (position, offset), the flat input element it reads, or
/// `w.slots` (the padding slot) where it falls outside the input.
SmallVector<int64_t> patchIndices(const Window &w) {
  const size_t k = w.kernel.size();
  SmallVector<int64_t> indices;
  indices.reserve(w.positions * w.offsets);
  SmallVector<int64_t> o(k, 0), j(k, 0);
  for (int64_t p = 0; p < w.positions; ++p) {
    for (int64_t rest = p, i = k; i-- > 0;) {
      o[i] = rest % w.output[i];
      rest /= w.output[i];
    }
    for (int64_t q = 0; q < w.offsets; ++q) {
      for (int64_t rest = q, i = k; i-- > 0;) {
        j[i] = rest % w.kernel[i];
        rest /= w.kernel[i];
      }
      int64_t flat = 0;
      bool inside = true;
      for (size_t i = 0; i < k && inside; ++i) {
        const int64_t c = o[i] * w.strides[i] - w.padBegin[i] + j[i] * w.dilations[i];
        inside = c >= 0 && c < w.input[i];
        flat = flat * w.input[i] + c;
      }
      indices.push_back(inside ? flat : w.slots);
    }
  }
  return indices;
}

/// patches [N, C, P, K] of x for window `w`, padding with `padValue`; with
/// none (a max), padding reads an element of its own window instead, which
/// leaves the max as it is. `indicesOut`, if given, receives the gathered
/// indices (w.slots for the padding).
Value gatherPatches(Compose &b, Value x, const Window &w, std::optional<float> padValue,
                    SmallVector<int64_t> *indicesOut = nullptr) {
  NodeImporter &n = b.n;
  ArrayRef<int64_t> shape = shapeOf(x);
  const int64_t batch = shape[0], channels = shape[1];
  Value padded = b.reshape(x, {batch, channels, w.slots});
  SmallVector<int64_t> indices = patchIndices(w);
  if (padValue) {
    auto padType = n.f32Tensor({batch, channels, 1});
    Value pad = graph::ConstantOp::create(n.builder, n.loc, padType, DenseElementsAttr::get(padType, *padValue));
    padded = graph::ConcatOp::create(n.builder, n.loc, n.f32Tensor({batch, channels, w.slots + 1}),
                                     ValueRange{padded, pad}, n.builder.getI64IntegerAttr(2));
  } else {
    for (int64_t p = 0; p < w.positions; ++p) {
      int64_t *window = indices.data() + p * w.offsets;
      int64_t inside = *std::find_if(window, window + w.offsets, [&](int64_t i) { return i != w.slots; });
      std::replace(window, window + w.offsets, w.slots, inside);
    }
  }
  auto indexType = RankedTensorType::get({static_cast<int64_t>(indices.size())}, n.builder.getI64Type());
  Value index = graph::ConstantOp::create(n.builder, n.loc, indexType,
                                          DenseElementsAttr::get(indexType, ArrayRef<int64_t>(indices)));
  if (indicesOut)
    *indicesOut = indices;
  Value picked = graph::GatherOp::create(n.builder, n.loc,
                                         n.f32Tensor({batch, channels, static_cast<int64_t>(indices.size())}),
                                         padded, index, n.builder.getI64IntegerAttr(2));
  return b.reshape(picked, {batch, channels, w.positions, w.offsets});
}

Value transpose(Compose &b, Value x, ArrayRef<int64_t> perm) {
  ArrayRef<int64_t> shape = shapeOf(x);
  SmallVector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(shape[p]);
  return graph::TransposeOp::create(b.n.builder, b.n.loc, b.n.f32Tensor(out), x, b.n.builder.getDenseI64ArrayAttr(perm));
}

/// [N, C, P] -> [N, C, o1..ok]
Value unflattenPositions(Compose &b, Value y, const Window &w) {
  SmallVector<int64_t> shape(shapeOf(y).begin(), shapeOf(y).begin() + 2);
  shape.append(w.output.begin(), w.output.end());
  return b.reshape(y, shape);
}

/// The window of an AveragePool or MaxPool node over its float input.
FailureOr<Window> poolingWindow(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(n.input(0));
  std::optional<SmallVector<int64_t>> kernel = n.intsAttr("kernel_shape");
  if (xs.size() < 3 || !kernel || kernel->size() != xs.size() - 2)
    return n.fail("X must be [N, C, spatial...] with a kernel_shape entry per spatial dimension");
  return windowOf(n, xs, *kernel, n.intAttr("ceil_mode", 0) != 0);
}

} // namespace

namespace {

/// X, W and the optional B of a Conv or a ConvTranspose: float tensors, X
/// [N, C, spatial...] and W of its rank (laid out as `weightLayout` says).
LogicalResult convolutionOperands(NodeImporter &n, StringRef weightLayout, Value &x, Value &weight, Value &bias) {
  x = n.input(0);
  weight = n.input(1);
  bias = n.input(2);
  if (!isF32(x) || !isF32(weight) || (bias && !isF32(bias)))
    return n.fail("X, W and B must be float tensors");
  if (shapeOf(x).size() < 3 || shapeOf(weight).size() != shapeOf(x).size())
    return n.fail("X must be [N, C, spatial...] and W " + weightLayout + " of the same rank");
  return success();
}

/// y [N, M, spatial...] plus the optional per-channel bias B [M].
Value addChannelBias(Compose &b, Value y, Value bias) {
  if (!bias)
    return y;
  SmallVector<int64_t> biasShape(shapeOf(y).size() - 1, 1);
  biasShape[0] = shapeOf(y)[1];
  return b.add(y, b.reshape(bias, biasShape));
}

} // namespace

LogicalResult fsdpc::import::convertConv(NodeImporter &n) {
  Value x, weight, bias;
  if (failed(convolutionOperands(n, "[M, C/group, kernel...]", x, weight, bias)))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x), ws = shapeOf(weight);
  const int64_t group = n.intAttr("group", 1), channels = xs[1], maps = ws[0];
  if (group <= 0 || channels % group != 0 || maps % group != 0 || ws[1] != channels / group)
    return n.fail("group " + Twine(group) + " does not divide the " + Twine(channels) + " input and " + Twine(maps) +
                  " output channels of W " + "[" + Twine(ws[0]) + ", " + Twine(ws[1]) + ", ...]");
  if (bias && shapeOf(bias) != ArrayRef<int64_t>{maps})
    return n.fail("B must be [M]");
  SmallVector<int64_t> kernel(ws.begin() + 2, ws.end());
  if (std::optional<SmallVector<int64_t>> given = n.intsAttr("kernel_shape"); given && *given != kernel)
    return n.fail("kernel_shape differs from W's shape");
  FailureOr<Window> w = windowOf(n, xs, kernel, /*ceilMode=*/false);
  if (failed(w))
    return failure();
  Compose b{n};
  const int64_t batch = xs[0], perGroup = channels / group, mapsPerGroup = maps / group;
  const int64_t depth = perGroup * w->offsets;
  // patches [N, C, P, K] -> [N, g, C/g, P, K] -> [N, g, P, C/g, K] -> [N, g, P, C/g K]
  Value patches = b.reshape(gatherPatches(b, x, *w, 0.0f), {batch, group, perGroup, w->positions, w->offsets});
  Value lhs = b.reshape(transpose(b, patches, {0, 1, 3, 2, 4}), {batch, group, w->positions, depth});
  // W [M, C/g, kernel...] -> [g, M/g, C/g K] -> [g, C/g K, M/g]
  Value rhs = transpose(b, b.reshape(weight, {group, mapsPerGroup, depth}), {0, 2, 1});
  Value y = graph::BatchMatmulOp::create(n.builder, n.loc, n.f32Tensor({batch, group, w->positions, mapsPerGroup}),
                                         lhs, rhs, false, false);
  // [N, g, P, M/g] -> [N, g, M/g, P] -> [N, M, o...]
  y = b.reshape(transpose(b, y, {0, 1, 3, 2}), {batch, maps, w->positions});
  y = unflattenPositions(b, y, *w);
  n.setOutput(0, addChannelBias(b, y, bias));
  return success();
}

/// ConvTranspose is the adjoint of a Conv: the Conv whose input has
/// ConvTranspose's output shape, with the same kernel, strides, dilations and
/// pads, reads input position o * s - pad + j * d for output position o and
/// kernel offset j; ConvTranspose adds x[o] * W[j] into exactly that
/// position. So the patches [N, M, P, K] are a batch matmul of x with W, and
/// gather_grad over the Conv's patch indices scatters them into the output
/// (the padding slot, one past the end, is sliced off).
LogicalResult fsdpc::import::convertConvTranspose(NodeImporter &n) {
  Value x, weight, bias;
  if (failed(convolutionOperands(n, "[C, M/group, kernel...]", x, weight, bias)))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x), ws = shapeOf(weight);
  const int64_t group = n.intAttr("group", 1), channels = xs[1];
  if (group <= 0 || channels % group != 0 || ws[0] != channels)
    return n.fail("W [" + Twine(ws[0]) + ", " + Twine(ws[1]) + ", ...] does not match " + Twine(channels) +
                  " input channels in " + Twine(group) + " groups");
  const int64_t maps = ws[1] * group, perGroup = channels / group, mapsPerGroup = ws[1];
  if (bias && shapeOf(bias) != ArrayRef<int64_t>{maps})
    return n.fail("B must be [" + Twine(maps) + "]");
  const size_t k = xs.size() - 2;
  SmallVector<int64_t> kernel(ws.begin() + 2, ws.end());
  if (std::optional<SmallVector<int64_t>> given = n.intsAttr("kernel_shape"); given && *given != kernel)
    return n.fail("kernel_shape differs from W's shape");
  auto ints = [&](StringRef name, int64_t fallback) {
    std::optional<SmallVector<int64_t>> given = n.intsAttr(name);
    return given ? *given : SmallVector<int64_t>(k, fallback);
  };
  Window w;
  w.kernel = kernel;
  w.strides = ints("strides", 1);
  w.dilations = ints("dilations", 1);
  SmallVector<int64_t> pads = ints("pads", 0), outputPadding = ints("output_padding", 0);
  if (pads.size() == k)
    pads.append(pads.begin(), pads.end());
  std::optional<SmallVector<int64_t>> outputShape = n.intsAttr("output_shape");
  if (outputShape && outputShape->size() == k + 2)
    outputShape->erase(outputShape->begin(), outputShape->begin() + 2);
  if (w.strides.size() != k || w.dilations.size() != k || pads.size() != 2 * k || outputPadding.size() != k ||
      (outputShape && outputShape->size() != k))
    return n.fail("strides, dilations, pads, output_padding and output_shape must have one entry per spatial "
                  "dimension");
  const std::string autoPad = n.stringAttr("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return n.fail("auto_pad '" + autoPad + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  for (size_t i = 0; i < k; ++i) {
    if (w.strides[i] <= 0 || w.dilations[i] <= 0 || w.kernel[i] <= 0 || outputPadding[i] < 0)
      return n.fail("strides, dilations and kernel sizes must be positive, output_padding not negative");
    const int64_t span = w.dilations[i] * (w.kernel[i] - 1) + 1;
    const int64_t full = w.strides[i] * (xs[2 + i] - 1) + outputPadding[i] + span;
    int64_t begin = pads[i], end = pads[i + k];
    // With output_shape (or SAME padding, whose output is input x stride)
    // the pads are derived from it, split as the ONNX reference splits them.
    std::optional<int64_t> wanted;
    if (outputShape)
      wanted = (*outputShape)[i];
    else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")
      wanted = xs[2 + i] * w.strides[i];
    if (autoPad == "VALID")
      begin = end = 0;
    if (wanted) {
      // A negative total pads with zeros nothing reaches (floor division,
      // as the reference's Python).
      const int64_t total = full - *wanted, half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      begin = autoPad == "SAME_UPPER" ? half : total - half;
      end = total - begin;
    }
    const int64_t out = full - begin - end;
    if (out <= 0 || outputPadding[i] >= std::max(w.strides[i], w.dilations[i]))
      return n.fail("pads, output_padding and the kernel leave no valid output in dimension " + Twine(i));
    w.input.push_back(out);
    w.output.push_back(xs[2 + i]);
    w.padBegin.push_back(begin);
    w.padEnd.push_back(end);
    w.positions *= xs[2 + i];
    w.offsets *= w.kernel[i];
    w.slots *= out;
  }
  Compose b{n};
  const int64_t batch = xs[0];
  // x [N, C, P] -> [N, g, C/g, P] -> [N, g, P, C/g]
  Value lhs = transpose(b, b.reshape(x, {batch, group, perGroup, w.positions}), {0, 1, 3, 2});
  // W [C, M/g, kernel...] -> [g, C/g, M/g K]
  Value rhs = b.reshape(weight, {group, perGroup, mapsPerGroup * w.offsets});
  Value patches = graph::BatchMatmulOp::create(n.builder, n.loc,
                                               n.f32Tensor({batch, group, w.positions, mapsPerGroup * w.offsets}),
                                               lhs, rhs, false, false);
  // [N, g, P, M/g, K] -> [N, g, M/g, P, K] -> [N, M, P K]
  patches = b.reshape(patches, {batch, group, w.positions, mapsPerGroup, w.offsets});
  patches = b.reshape(transpose(b, patches, {0, 1, 3, 2, 4}), {batch, maps, w.positions * w.offsets});
  SmallVector<int64_t> indices = patchIndices(w);
  auto indexType = RankedTensorType::get({static_cast<int64_t>(indices.size())}, n.builder.getI64Type());
  Value index = graph::ConstantOp::create(n.builder, n.loc, indexType,
                                          DenseElementsAttr::get(indexType, ArrayRef<int64_t>(indices)));
  Value y = graph::GatherGradOp::create(n.builder, n.loc, n.f32Tensor({batch, maps, w.slots + 1}), patches, index,
                                        n.builder.getI64IntegerAttr(2));
  y = graph::SliceOp::create(n.builder, n.loc, n.f32Tensor({batch, maps, w.slots}), y,
                             n.builder.getDenseI64ArrayAttr({0, 0, 0}), n.builder.getDenseI64ArrayAttr({1, 1, 1}));
  SmallVector<int64_t> shape = {batch, maps};
  shape.append(w.input.begin(), w.input.end());
  y = b.reshape(y, shape);
  n.setOutput(0, addChannelBias(b, y, bias));
  return success();
}

LogicalResult fsdpc::import::convertAveragePool(NodeImporter &n) {
  FailureOr<Window> w = poolingWindow(n);
  if (failed(w))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> xs = shapeOf(x);
  Compose b{n};
  SmallVector<int64_t> indices;
  Value patches = gatherPatches(b, x, *w, 0.0f, &indices);
  auto sumType = n.f32Tensor({xs[0], xs[1], w->positions, 1});
  Value sum = graph::ReduceSumOp::create(n.builder, n.loc, sumType, patches, n.builder.getDenseI64ArrayAttr({3}),
                                         n.builder.getBoolAttr(true));
  // Divided by the window's size, or (count_include_pad = 0, ONNX's
  // default) by the elements of it inside the input.
  SmallVector<float> divisor(w->positions);
  const bool includePad = n.intAttr("count_include_pad", 0) != 0;
  for (int64_t p = 0; p < w->positions; ++p) {
    int64_t inside = 0;
    for (int64_t q = 0; q < w->offsets; ++q)
      inside += indices[p * w->offsets + q] != w->slots;
    divisor[p] = 1.0f / static_cast<float>(includePad ? w->offsets : std::max<int64_t>(inside, 1));
  }
  auto divisorType = n.f32Tensor({w->positions, 1});
  Value scaleBy = graph::ConstantOp::create(n.builder, n.loc, divisorType,
                                            DenseElementsAttr::get(divisorType, ArrayRef<float>(divisor)));
  Value y = b.reshape(b.mul(sum, scaleBy), {xs[0], xs[1], w->positions});
  n.setOutput(0, unflattenPositions(b, y, *w));
  return success();
}

LogicalResult fsdpc::import::convertMaxPool(NodeImporter &n) {
  if (n.wantsOutput(1))
    return n.fail("the Indices output is not supported");
  if (n.intAttr("storage_order", 0) != 0)
    return n.fail("storage_order 1 is not supported");
  FailureOr<Window> w = poolingWindow(n);
  if (failed(w))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> xs = shapeOf(x);
  Compose b{n};
  Value patches = gatherPatches(b, x, *w, std::nullopt);
  // The max over the K offsets, pairwise: max(a, b) = b + relu(a - b).
  auto sliceType = n.f32Tensor({xs[0], xs[1], w->positions, 1});
  Value y;
  for (int64_t q = 0; q < w->offsets; ++q) {
    Value slice = graph::SliceOp::create(n.builder, n.loc, sliceType, patches,
                                         n.builder.getDenseI64ArrayAttr({0, 0, 0, q}),
                                         n.builder.getDenseI64ArrayAttr({1, 1, 1, 1}));
    y = y ? b.add(slice, b.relu(b.sub(y, slice))) : slice;
  }
  y = b.reshape(y, {xs[0], xs[1], w->positions});
  n.setOutput(0, unflattenPositions(b, y, *w));
  return success();
}

LogicalResult fsdpc::import::convertSoftsign(NodeImporter &n) {
  // x / (1 + |x|)
  return composeUnary(n, [](Compose &b, Value x) {
    Value one = b.constant(1.0f), magnitude = b.abs(x); // in this order, whatever the C++ compiler's
    Value denominator = b.add(one, magnitude);
    return b.div(x, denominator);
  });
}

LogicalResult fsdpc::import::convertSelu(NodeImporter &n) {
  // gamma elu(x, alpha), the constants torch's nn.SELU uses by default.
  const double alpha = n.floatAttr("alpha", 1.67326319217681884765625f),
               gamma = n.floatAttr("gamma", 1.05070102214813232421875f);
  return composeUnary(n, [&](Compose &b, Value x) { return b.scale(exponentialLinear(b, x, alpha, 1.0), gamma); });
}

LogicalResult fsdpc::import::convertCelu(NodeImporter &n) {
  const double alpha = n.floatAttr("alpha", 1.0f);
  if (alpha == 0)
    return n.fail("alpha must not be 0");
  return composeUnary(n, [&](Compose &b, Value x) { return exponentialLinear(b, x, alpha, alpha); });
}

LogicalResult fsdpc::import::convertVariadicSum(NodeImporter &n, bool mean) {
  if (n.numInputs() == 0)
    return n.fail("needs at least one input");
  if (failed(requireFloatInputs(n, n.numInputs())))
    return failure();
  Compose b{n};
  Value y = n.input(0);
  for (int i = 1; i < n.numInputs(); ++i) {
    if (failed(graph::broadcastShapes(shapeOf(y), shapeOf(n.input(i)))))
      return n.fail("operands do not broadcast");
    y = b.add(y, n.input(i));
  }
  n.setOutput(0, mean ? b.scale(y, 1.0 / n.numInputs()) : y);
  return success();
}

LogicalResult fsdpc::import::convertHardmax(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Compose b{n};
  Value x = n.input(0);
  const SmallVector<int64_t> shape(shapeOf(x));
  const int64_t rank = shape.size();
  if (rank == 0)
    return n.fail("input must have at least one dimension");
  int64_t axis = n.intAttr("axis", n.opset < 13 ? 1 : -1);
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank)
    return n.fail("axis " + Twine(n.intAttr("axis", 0)) + " is outside the input's rank " + Twine(rank));
  // Before opset 13 the input is read as 2-D, [d0 ... d(axis-1), the rest],
  // and the rows are its second dimension; from 13 on, the axis alone.
  // Either way the rows end up in the last dimension: a one-hot of the
  // first maximum's index (arg_max's ties) along it.
  SmallVector<int64_t> perm;
  Value rows = x;
  if (n.opset < 13) {
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d)
      (d < axis ? outer : inner) *= shape[d];
    rows = b.reshape(x, {outer, inner});
  } else if (axis != rank - 1) {
    perm = axisLastPermutation(rank, axis);
    rows = b.transpose(x, perm);
  }
  SmallVector<int64_t> rowShape(shapeOf(rows));
  const int64_t classes = rowShape.back();
  SmallVector<int64_t> kept(rowShape);
  kept.back() = 1;
  Value index = graph::ArgMaxOp::create(n.builder, n.loc, RankedTensorType::get(kept, n.builder.getI64Type()), rows,
                                        n.builder.getI64IntegerAttr(static_cast<int64_t>(rowShape.size()) - 1),
                                        n.builder.getBoolAttr(false));
  SmallVector<int64_t> labels(rowShape.begin(), rowShape.end() - 1);
  index = b.reshape(index, labels);
  labels.push_back(classes);
  Value y = graph::OneHotOp::create(n.builder, n.loc, n.f32Tensor(labels), index, IntegerAttr());
  if (n.opset < 13) {
    y = b.reshape(y, shape);
  } else if (!perm.empty()) {
    y = b.transpose(y, inversePermutation(perm));
  }
  n.setOutput(0, y);
  return success();
}

LogicalResult fsdpc::import::convertGlobalMaxPool(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  const int64_t rank = shapeOf(x).size();
  if (rank < 3)
    return n.fail("input must be [N, C, spatial...]");
  Compose b{n};
  for (int64_t d = 2; d < rank; ++d)
    x = b.maxAlong(x, d);
  n.setOutput(0, x);
  return success();
}

namespace {

/// Reshape, transpose, reshape: DepthToSpace and SpaceToDepth move blocks
/// of b x b between the channels and the two spatial dimensions.
LogicalResult moveBlocks(NodeImporter &n, bool toSpace) {
  Value x = n.input(0);
  if (!x)
    return n.fail("needs an input");
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() != 4)
    return n.fail("input must be [N, C, H, W], got " + Twine(shapeString(shape)));
  const int64_t block = n.intAttr("blocksize", 0);
  if (block < 1)
    return n.fail("blocksize must be at least 1");
  const int64_t batch = shape[0], channels = shape[1], height = shape[2], width = shape[3];
  Compose b{n};
  if (toSpace) {
    if (channels % (block * block) != 0)
      return n.fail("channels " + Twine(channels) + " are not a multiple of blocksize^2 = " + Twine(block * block));
    const int64_t depth = channels / (block * block);
    const std::string mode = n.stringAttr("mode", "DCR");
    Value moved;
    if (mode == "DCR")
      moved = b.transpose(b.reshape(x, {batch, block, block, depth, height, width}), {0, 3, 4, 1, 5, 2});
    else if (mode == "CRD")
      moved = b.transpose(b.reshape(x, {batch, depth, block, block, height, width}), {0, 1, 4, 2, 5, 3});
    else
      return n.fail("mode must be DCR or CRD, got '" + Twine(mode) + "'");
    n.setOutput(0, b.reshape(moved, {batch, depth, height * block, width * block}));
    return success();
  }
  if (height % block != 0 || width % block != 0)
    return n.fail("height and width " + Twine(height) + "x" + Twine(width) + " are not multiples of blocksize " +
                  Twine(block));
  Value moved =
      b.transpose(b.reshape(x, {batch, channels, height / block, block, width / block, block}), {0, 3, 5, 1, 2, 4});
  n.setOutput(0, b.reshape(moved, {batch, channels * block * block, height / block, width / block}));
  return success();
}

/// The source index along an axis of `size` for padded position `i`
/// (which may lie before 0 or past the end), by Pad's mode.
int64_t padSource(const std::string &mode, int64_t i, int64_t size) {
  if (mode == "edge")
    return std::clamp<int64_t>(i, 0, size - 1);
  if (mode == "wrap")
    return ((i % size) + size) % size;
  // reflect: mirrored at the first and last element, which are not repeated
  if (size == 1)
    return 0;
  const int64_t period = 2 * (size - 1);
  const int64_t folded = ((i % period) + period) % period;
  return folded < size ? folded : period - folded;
}

} // namespace

LogicalResult fsdpc::import::convertDepthToSpace(NodeImporter &n) { return moveBlocks(n, /*toSpace=*/true); }
LogicalResult fsdpc::import::convertSpaceToDepth(NodeImporter &n) { return moveBlocks(n, /*toSpace=*/false); }

LogicalResult fsdpc::import::convertPad(NodeImporter &n) {
  Value x = n.input(0);
  // Floats, or integers (ids and masks padded to a length): every op below
  // moves elements of either type.
  const bool integers = isI64(x);
  if (!integers && failed(requireFloatInputs(n, 1)))
    return failure();
  const Type element = cast<RankedTensorType>(x.getType()).getElementType();
  auto tensorOf = [&](ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, element); };
  const int64_t rank = shapeOf(x).size();
  const std::string mode = n.stringAttr("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return n.fail("mode must be constant, reflect, edge or wrap, got '" + Twine(mode) + "'");
  // Before opset 11 the pads and the value are attributes; from 11 on,
  // inputs that must be constants here; from 18 on, axes may name which
  // dimensions the pads are for.
  SmallVector<int64_t> pads;
  float value = 0;
  int64_t integerValue = 0;
  SmallVector<int64_t> axes;
  if (n.opset < 11) {
    std::optional<SmallVector<int64_t>> attr = n.intsAttr("pads");
    if (!attr)
      return n.fail("needs pads");
    pads = *attr;
    value = n.floatAttr("value", 0.0f);
  } else {
    DenseElementsAttr padsAttr = n.constantInput(1);
    if (!padsAttr || !padsAttr.getElementType().isInteger(64))
      return n.fail("pads must be a constant");
    pads.assign(padsAttr.getValues<int64_t>().begin(), padsAttr.getValues<int64_t>().end());
    if (n.hasInput(2) && integers) {
      DenseElementsAttr constantValue = n.constantInput(2);
      if (!constantValue || constantValue.getNumElements() != 1 || !constantValue.getElementType().isInteger(64))
        return n.fail("constant_value must be a constant integer scalar");
      integerValue = *constantValue.getValues<int64_t>().begin();
    } else if (n.hasInput(2)) {
      std::optional<float> constantValue = constantScalar(n, 2);
      if (!constantValue)
        return n.fail("constant_value must be a constant float scalar");
      value = *constantValue;
    }
    if (n.hasInput(3)) {
      DenseElementsAttr axesAttr = n.constantInput(3);
      if (!axesAttr || !axesAttr.getElementType().isInteger(64))
        return n.fail("axes must be a constant");
      for (int64_t axis : axesAttr.getValues<int64_t>())
        axes.push_back(axis < 0 ? axis + rank : axis);
    }
  }
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    return n.fail("pads has " + Twine(pads.size()) + " entries for " + Twine(axes.size()) + " axes");
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t axis = axes[k], before = pads[k], after = pads[k + axes.size()];
    if (axis < 0 || axis >= rank)
      return n.fail("axis " + Twine(axis) + " is outside the input's rank " + Twine(rank));
    if (before == 0 && after == 0)
      continue;
    SmallVector<int64_t> shape(shapeOf(x));
    const int64_t size = shape[axis];
    // Negative pads crop first.
    if (before < 0 || after < 0) {
      const int64_t start = std::max<int64_t>(-before, 0), end = size - std::max<int64_t>(-after, 0);
      if (end < start)
        return n.fail("pads crop more than the " + Twine(size) + " elements of axis " + Twine(axis));
      SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
      starts[axis] = start;
      shape[axis] = end - start;
      x = graph::SliceOp::create(n.builder, n.loc, tensorOf(shape), x, n.builder.getDenseI64ArrayAttr(starts),
                                 n.builder.getDenseI64ArrayAttr(steps));
    }
    const int64_t grow = std::max<int64_t>(before, 0), growAfter = std::max<int64_t>(after, 0);
    if (grow == 0 && growAfter == 0)
      continue;
    const int64_t kept = shape[axis];
    if (mode == "constant") {
      // A block of `value` of `length` along the axis.
      auto block = [&](int64_t length) -> Value {
        SmallVector<int64_t> blockShape(shape);
        blockShape[axis] = length;
        auto type = tensorOf(blockShape);
        DenseElementsAttr fill =
            integers ? DenseElementsAttr::get(type, integerValue) : DenseElementsAttr::get(type, value);
        return graph::ConstantOp::create(n.builder, n.loc, type, fill);
      };
      SmallVector<Value> parts;
      if (grow > 0)
        parts.push_back(block(grow));
      parts.push_back(x);
      if (growAfter > 0)
        parts.push_back(block(growAfter));
      shape[axis] = kept + grow + growAfter;
      x = graph::ConcatOp::create(n.builder, n.loc, tensorOf(shape), parts, n.builder.getI64IntegerAttr(axis));
      continue;
    }
    if (kept == 0)
      return n.fail("mode " + Twine(mode) + " cannot pad the empty axis " + Twine(axis));
    // reflect, edge and wrap: a gather of each padded position's source.
    SmallVector<int64_t> sources;
    for (int64_t i = -grow; i < kept + growAfter; ++i)
      sources.push_back(padSource(mode, i, kept));
    auto indexType = RankedTensorType::get({static_cast<int64_t>(sources.size())}, n.builder.getI64Type());
    Value index = graph::ConstantOp::create(n.builder, n.loc, indexType,
                                            DenseElementsAttr::get(indexType, ArrayRef<int64_t>(sources)));
    shape[axis] = static_cast<int64_t>(sources.size());
    x = graph::GatherOp::create(n.builder, n.loc, tensorOf(shape), x, index, n.builder.getI64IntegerAttr(axis));
  }
  n.setOutput(0, x);
  return success();
}
