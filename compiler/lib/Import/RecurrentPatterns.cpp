//===- RecurrentPatterns.cpp - LSTM, GRU and RNN, unrolled over time ------===//
//
// fsdpc compiles static shapes, so a recurrent layer is unrolled over its
// sequence: the input projection of every step is one matmul ([T B, I] x
// [I, G H]), then each step adds its recurrent matmul ([B, H] x [H, G H])
// and applies the cell's gates, which are slices of the G H columns in
// ONNX's order (LSTM i o f c, GRU z r h). A reverse direction walks the
// steps backwards; a bidirectional layer is both, their outputs side by
// side. Every op is a graph op with a gradient rule, so the backward is
// backpropagation through time with nothing recurrent-specific; what it
// keeps is every step's gates, as torch's does.
//
// Supported: the default activations (LSTM and GRU sigmoid / tanh / tanh,
// RNN tanh; RNN also relu and sigmoid), LSTM peepholes, GRU's
// linear_before_reset either way (torch exports 1), both layouts. Refused
// with a message: clip, input_forget, other activations, and
// sequence_lens that differ from the sequence length (padding masks per
// batch element would need a select per step; torch exports no
// sequence_lens for a plain nn.LSTM).
//
//===----------------------------------------------------------------------===//
#include "CompositePatterns.h"
#include "Compose.h"

#include "fsdpc/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

namespace {

enum class Cell { kLstm, kGru, kRnn };

/// The number of gates, i.e. of H-column blocks in W and R.
int64_t gatesOf(Cell cell) { return cell == Cell::kLstm ? 4 : cell == Cell::kGru ? 3 : 1; }

llvm::StringRef nameOf(Cell cell) { return cell == Cell::kLstm ? "LSTM" : cell == Cell::kGru ? "GRU" : "RNN"; }

/// A constant of zeros, the default initial states.
Value zeros(NodeImporter &n, ArrayRef<int64_t> shape) {
  auto type = n.f32Tensor(shape);
  return graph::ConstantOp::create(n.builder, n.loc, type, DenseElementsAttr::get(type, 0.0f));
}

/// The recurrent layer's settings and the graph ops that build it.
struct Unroller {
  NodeImporter &n;
  Compose b;
  Cell cell;
  int64_t steps = 0, batch = 0, inputSize = 0, hidden = 0, directions = 1;
  bool reverseOnly = false, linearBeforeReset = false, batchFirst = false;
  Value (Unroller::*activation)(Value) = nullptr; // RNN's f

  /// `x[starts .. starts + sizes)`, unit steps.
  Value slice(Value x, ArrayRef<int64_t> starts, ArrayRef<int64_t> sizes) {
    SmallVector<int64_t> unitSteps(starts.size(), 1);
    return graph::SliceOp::create(n.builder, n.loc, n.f32Tensor(sizes), x, n.builder.getDenseI64ArrayAttr(starts),
                                  n.builder.getDenseI64ArrayAttr(unitSteps));
  }
  /// Gate `g` of a [B, G H] tensor of gate columns.
  Value gate(Value columns, int64_t g) { return slice(columns, {0, g * hidden}, {batch, hidden}); }
  /// Direction d of a [D, ...] tensor, without its leading dimension.
  Value direction(Value x, int64_t d) {
    SmallVector<int64_t> starts(shapeOf(x).size(), 0), sizes(shapeOf(x));
    starts[0] = d;
    sizes[0] = 1;
    Value one = shapeOf(x)[0] == 1 ? x : slice(x, starts, sizes);
    return b.reshape(one, ArrayRef<int64_t>(sizes).drop_front());
  }
  /// [rows, k] x [n, k]^T.
  Value matmulTransposed(Value lhs, Value rhs) {
    return graph::MatmulOp::create(n.builder, n.loc, n.f32Tensor({shapeOf(lhs)[0], shapeOf(rhs)[0]}), lhs, rhs, false,
                                   true);
  }
  Value sigmoid(Value x) { return graph::SigmoidOp::create(n.builder, n.loc, x); }
  Value tanh(Value x) { return b.tanh(x); }
  Value relu(Value x) { return b.relu(x); }

  /// One direction over every step: Y as [T, B, H] (step order), the last
  /// hidden and (LSTM) cell state. A null h0 / c0 is the default zero
  /// state, whose first step needs no recurrent product (nor LSTM's
  /// forget term).
  struct Run {
    Value y, lastHidden, lastCell;
  };
  Run run(bool reverse, Value x, Value w, Value r, Value bias, Value h0, Value c0, Value peephole) {
    const int64_t gates = gatesOf(cell);
    // Every step's input projection at once, with W's bias, and R's for
    // LSTM and RNN; GRU adds R's bias to its recurrent product, since its
    // h gate resets that product (bias included) or adds the bias after
    // the reset one.
    Value flat = b.reshape(x, {steps * batch, inputSize});
    Value projected = matmulTransposed(flat, w);
    Value recurrentBias;
    if (bias) {
      Value inputBias = slice(bias, {0}, {gates * hidden});
      recurrentBias = slice(bias, {gates * hidden}, {gates * hidden});
      Value both = cell == Cell::kGru ? inputBias : b.add(inputBias, recurrentBias);
      projected = b.add(projected, both);
    }
    projected = b.reshape(projected, {steps, batch, gates * hidden});
    Value hiddenState = h0, cellState = c0;
    SmallVector<Value> outputs(steps);
    for (int64_t i = 0; i < steps; ++i) {
      const int64_t t = reverse ? steps - 1 - i : i;
      Value inputGates = b.reshape(slice(projected, {t, 0, 0}, {1, batch, gates * hidden}), {batch, gates * hidden});
      switch (cell) {
      case Cell::kLstm: {
        Value all = hiddenState ? b.add(inputGates, matmulTransposed(hiddenState, r)) : inputGates;
        Value inputPre = gate(all, 0), outputPre = gate(all, 1), forgetPre = gate(all, 2);
        Value candidate = tanh(gate(all, 3));
        if (peephole && cellState) {
          Value inputPeep = slice(peephole, {0}, {hidden});
          inputPre = b.add(inputPre, b.mul(inputPeep, cellState));
          Value forgetPeep = slice(peephole, {2 * hidden}, {hidden});
          forgetPre = b.add(forgetPre, b.mul(forgetPeep, cellState));
        }
        Value inputGate = sigmoid(inputPre);
        Value written = b.mul(inputGate, candidate);
        if (cellState) {
          Value forgetGate = sigmoid(forgetPre);
          written = b.add(b.mul(forgetGate, cellState), written);
        }
        cellState = written;
        if (peephole) {
          Value outputPeep = slice(peephole, {hidden}, {hidden});
          outputPre = b.add(outputPre, b.mul(outputPeep, cellState));
        }
        Value outputGate = sigmoid(outputPre);
        hiddenState = b.mul(outputGate, tanh(cellState));
        break;
      }
      case Cell::kGru: {
        if (!hiddenState) // its update reads the state itself
          hiddenState = zeros(n, {batch, hidden});
        // With linear_before_reset the h gate's recurrent product is
        // taken with z's and r's and reset after (torch's GRU); without,
        // the reset applies to H before its own product, (r H) R_h^T.
        const int64_t together = linearBeforeReset ? 3 : 2;
        Value rows = linearBeforeReset ? r : slice(r, {0, 0}, {2 * hidden, hidden});
        Value recurrent = matmulTransposed(hiddenState, rows);
        if (recurrentBias)
          recurrent = b.add(recurrent, slice(recurrentBias, {0}, {together * hidden}));
        Value updateInput = gate(inputGates, 0);
        Value update = sigmoid(b.add(updateInput, gate(recurrent, 0)));
        Value resetInput = gate(inputGates, 1);
        Value reset = sigmoid(b.add(resetInput, gate(recurrent, 1)));
        Value candidateRecurrent;
        if (linearBeforeReset) {
          candidateRecurrent = b.mul(reset, gate(recurrent, 2));
        } else {
          Value resetHidden = b.mul(reset, hiddenState);
          Value rh = slice(r, {2 * hidden, 0}, {hidden, hidden});
          candidateRecurrent = matmulTransposed(resetHidden, rh);
          if (recurrentBias)
            candidateRecurrent = b.add(candidateRecurrent, slice(recurrentBias, {2 * hidden}, {hidden}));
        }
        Value candidate = tanh(b.add(gate(inputGates, 2), candidateRecurrent));
        // (1 - z) h~ + z H = h~ + z (H - h~).
        Value toPrevious = b.sub(hiddenState, candidate);
        hiddenState = b.add(candidate, b.mul(update, toPrevious));
        break;
      }
      case Cell::kRnn: {
        Value pre = hiddenState ? b.add(inputGates, matmulTransposed(hiddenState, r)) : inputGates;
        hiddenState = (this->*activation)(pre);
        break;
      }
      }
      outputs[t] = b.reshape(hiddenState, {1, batch, hidden});
    }
    Value y = steps == 1 ? outputs[0]
                         : graph::ConcatOp::create(n.builder, n.loc, n.f32Tensor({steps, batch, hidden}),
                                                   ValueRange(outputs), n.builder.getI64IntegerAttr(0))
                               .getResult();
    return {y, hiddenState, cellState};
  }
};

LogicalResult convertRecurrent(NodeImporter &n, Cell cell) {
  Unroller u{n, Compose{n}, cell};
  const int64_t gates = gatesOf(cell);
  u.hidden = n.intAttr("hidden_size", 0);
  if (u.hidden < 1)
    return n.fail("hidden_size must be given and positive");
  if (n.attribute("clip"))
    return n.fail("clip is not supported");
  if (n.intAttr("input_forget", 0) != 0)
    return n.fail("input_forget is not supported");
  u.batchFirst = n.intAttr("layout", 0) != 0;
  u.linearBeforeReset = n.intAttr("linear_before_reset", 0) != 0;
  const std::string direction = n.stringAttr("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return n.fail("direction '" + direction + "' is not forward, reverse or bidirectional");
  u.directions = direction == "bidirectional" ? 2 : 1;
  u.reverseOnly = direction == "reverse";

  // Activations: the defaults, and for RNN relu or sigmoid too.
  SmallVector<std::string> activations;
  if (const onnx::AttributeProto *attr = n.attribute("activations"))
    for (const std::string &name : attr->strings())
      activations.push_back(name);
  SmallVector<std::string> defaults = cell == Cell::kLstm  ? SmallVector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                      : cell == Cell::kGru ? SmallVector<std::string>{"Sigmoid", "Tanh"}
                                                           : SmallVector<std::string>{"Tanh"};
  u.activation = &Unroller::tanh;
  for (size_t i = 0; i < activations.size(); ++i) {
    const std::string &want = defaults[i % defaults.size()];
    if (cell == Cell::kRnn && (activations[i] == "Relu" || activations[i] == "Sigmoid" || activations[i] == "Tanh")) {
      if (i > 0 && activations[i] != activations[0])
        return n.fail("directions with different activations are not supported");
      u.activation = activations[i] == "Relu"      ? &Unroller::relu
                     : activations[i] == "Sigmoid" ? &Unroller::sigmoid
                                                   : &Unroller::tanh;
      continue;
    }
    if (activations[i] != want)
      return n.fail("activation '" + activations[i] + "' is not supported (" + nameOf(cell) + " takes its defaults)");
  }

  if (failed(requireFloatInputs(n, 3)))
    return failure();
  Value x = n.input(0), w = n.input(1), r = n.input(2);
  ArrayRef<int64_t> xShape = shapeOf(x);
  if (xShape.size() != 3)
    return n.fail("X must be 3-D, got " + Twine(shapeString(xShape)));
  u.steps = u.batchFirst ? xShape[1] : xShape[0];
  u.batch = u.batchFirst ? xShape[0] : xShape[1];
  u.inputSize = xShape[2];
  const int64_t d = u.directions, h = u.hidden;
  auto expect = [&](Value v, ArrayRef<int64_t> shape, llvm::StringRef name) -> LogicalResult {
    if (!v || !isF32(v) || shapeOf(v) != shape)
      return n.fail(Twine(name) + " must be a float tensor " + shapeString(shape) +
                    (v ? ", got " + shapeString(shapeOf(v)) : std::string()));
    return success();
  };
  if (failed(expect(w, {d, gates * h, u.inputSize}, "W")) || failed(expect(r, {d, gates * h, h}, "R")))
    return failure();
  Value bias = n.hasInput(3) ? n.input(3) : Value();
  if (bias && failed(expect(bias, {d, 2 * gates * h}, "B")))
    return failure();
  if (n.hasInput(4)) {
    DenseElementsAttr lengths = n.constantInput(4);
    if (!lengths || llvm::any_of(lengths.getValues<int64_t>(), [&](int64_t l) { return l != u.steps; }))
      return n.fail("sequence_lens must be a constant equal to the sequence length " + Twine(u.steps) +
                    " for every batch element");
  }
  SmallVector<int64_t> stateShape =
      u.batchFirst ? SmallVector<int64_t>{u.batch, d, h} : SmallVector<int64_t>{d, u.batch, h};
  Value h0 = n.hasInput(5) ? n.input(5) : Value(), c0 = n.hasInput(6) ? n.input(6) : Value();
  if (h0 && failed(expect(h0, stateShape, "initial_h")))
    return failure();
  if (c0 && failed(expect(c0, stateShape, "initial_c")))
    return failure();
  Value peephole = cell == Cell::kLstm && n.hasInput(7) ? n.input(7) : Value();
  if (peephole && failed(expect(peephole, {d, 3 * h}, "P")))
    return failure();

  Compose &b = u.b;
  // Time-major X and states.
  Value input = u.batchFirst ? b.transpose(x, {1, 0, 2}) : x;
  if (h0 && u.batchFirst)
    h0 = b.transpose(h0, {1, 0, 2});
  if (c0 && u.batchFirst)
    c0 = b.transpose(c0, {1, 0, 2});
  SmallVector<Value> ys, lastHidden, lastCell;
  for (int64_t dir = 0; dir < d; ++dir) {
    const bool reverse = u.reverseOnly || dir == 1;
    Value hStart = h0 ? u.direction(h0, dir) : Value();
    Value cStart = cell == Cell::kLstm && c0 ? u.direction(c0, dir) : Value();
    Value wd = u.direction(w, dir);
    Value rd = u.direction(r, dir);
    Value bd = bias ? u.direction(bias, dir) : Value();
    Value pd = peephole ? u.direction(peephole, dir) : Value();
    Unroller::Run run = u.run(reverse, input, wd, rd, bd, hStart, cStart, pd);
    ys.push_back(b.reshape(run.y, {u.steps, 1, u.batch, h}));
    lastHidden.push_back(b.reshape(run.lastHidden, {1, u.batch, h}));
    if (run.lastCell)
      lastCell.push_back(b.reshape(run.lastCell, {1, u.batch, h}));
  }
  auto joined = [&](ArrayRef<Value> parts, SmallVector<int64_t> shape, int64_t axis) -> Value {
    if (parts.size() == 1)
      return parts[0];
    return graph::ConcatOp::create(n.builder, n.loc, n.f32Tensor(shape), parts, n.builder.getI64IntegerAttr(axis));
  };
  Value y = joined(ys, {u.steps, d, u.batch, h}, 1);
  Value yh = joined(lastHidden, {d, u.batch, h}, 0);
  Value yc = lastCell.empty() ? Value() : joined(lastCell, {d, u.batch, h}, 0);
  if (u.batchFirst) {
    // Y [B, T, D, H], Y_h and Y_c [B, D, H].
    y = b.transpose(y, {2, 0, 1, 3});
    yh = b.transpose(yh, {1, 0, 2});
    if (yc)
      yc = b.transpose(yc, {1, 0, 2});
  }
  n.setOutput(0, y);
  n.setOutput(1, yh);
  if (yc)
    n.setOutput(2, yc);
  return success();
}

} // namespace

LogicalResult fsdpc::import::convertLstm(NodeImporter &n) { return convertRecurrent(n, Cell::kLstm); }
LogicalResult fsdpc::import::convertGru(NodeImporter &n) { return convertRecurrent(n, Cell::kGru); }
LogicalResult fsdpc::import::convertRnn(NodeImporter &n) { return convertRecurrent(n, Cell::kRnn); }
