//===- AppendLoss.cpp - graph-append-loss ---------------------------------===//
//
// Builds @train_step from the imported @forward by appending the loss that
// torch users would compute in their training loop: one of torch's losses
// of one output, or a weighted sum of several (a question-answering head's
// `(start_loss + end_loss) / 2`, a pretraining head's MLM plus NSP loss).
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstdlib>

namespace fsdpc::graph {
#define GEN_PASS_DEF_GRAPHAPPENDLOSS
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace fsdpc::graph

using namespace mlir;
using namespace fsdpc::graph;

namespace {

/// The label F.cross_entropy skips by default (ignore_index=-100).
constexpr int64_t kTorchIgnoreIndex = -100;

/// One loss the --loss expression names: `kind(output, labels)`.
struct LossCall {
  std::string kind;   // cross_entropy, mse or output
  std::string output; // the model output it reads; empty: the first
  std::string labels; // the input its labels come from; empty: `labels`
  bool operator==(const LossCall &other) const {
    return kind == other.kind && output == other.output && labels == other.labels;
  }
};

/// A weighted sum of calls, or a plain number while `calls` is empty.
struct LinearLoss {
  double number = 0;
  SmallVector<std::pair<double, LossCall>> calls;
  bool isNumber() const { return calls.empty(); }
  void scale(double factor) {
    number *= factor;
    for (auto &call : calls)
      call.first *= factor;
  }
};

/// Parses --loss. The grammar is the arithmetic a torch training loop
/// writes, restricted to what has a gradient a step can follow: sums,
/// differences, and products and quotients by numbers, of
///   cross_entropy(OUTPUT[, LABELS])  mse(OUTPUT[, LABELS])  output(NAME)
/// where a bare `cross_entropy` or `mse` reads the model's first output
/// against an input `labels`, and `output:NAME` alone is `output(NAME)`.
class LossParser {
public:
  explicit LossParser(StringRef text) : text_(text) {}

  /// The loss as weights of distinct calls, or failure with `error` set.
  FailureOr<LinearLoss> parse(std::string &error) {
    if (text_.starts_with("output:")) {
      LinearLoss loss;
      loss.calls.push_back({1.0, {"output", text_.drop_front(strlen("output:")).str(), ""}});
      return loss;
    }
    FailureOr<LinearLoss> loss = parseSum();
    skipSpace();
    if (succeeded(loss) && pos_ < text_.size())
      loss = fail("unexpected '" + text_.drop_front(pos_).str() + "'");
    if (succeeded(loss) && loss->isNumber())
      loss = fail("names no loss (expected cross_entropy, mse or output(NAME))");
    if (failed(loss)) {
      error = error_;
      return failure();
    }
    // The same call twice is one term (computed once) with the summed weight.
    LinearLoss merged;
    for (auto &[weight, call] : loss->calls) {
      auto *same = llvm::find_if(merged.calls, [&](const auto &entry) { return entry.second == call; });
      if (same == merged.calls.end())
        merged.calls.push_back({weight, call});
      else
        same->first += weight;
    }
    return merged;
  }

private:
  FailureOr<LinearLoss> fail(const std::string &message) {
    if (error_.empty())
      error_ = message;
    return failure();
  }
  void skipSpace() {
    while (pos_ < text_.size() && llvm::isSpace(text_[pos_]))
      ++pos_;
  }
  bool consume(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  FailureOr<LinearLoss> parseSum() {
    FailureOr<LinearLoss> sum = parseProduct();
    while (succeeded(sum)) {
      double sign = consume('+') ? 1.0 : consume('-') ? -1.0 : 0.0;
      if (sign == 0.0)
        break;
      FailureOr<LinearLoss> rhs = parseProduct();
      if (failed(rhs))
        return failure();
      if (sum->isNumber() != rhs->isNumber())
        return fail("adds a number to a loss, which changes no gradient");
      rhs->scale(sign);
      sum->number += rhs->number;
      sum->calls.append(rhs->calls.begin(), rhs->calls.end());
    }
    return sum;
  }

  FailureOr<LinearLoss> parseProduct() {
    FailureOr<LinearLoss> product = parseFactor();
    while (succeeded(product)) {
      bool multiply = consume('*');
      if (!multiply && !consume('/'))
        break;
      FailureOr<LinearLoss> rhs = parseFactor();
      if (failed(rhs))
        return failure();
      if (!multiply) {
        if (!rhs->isNumber())
          return fail("divides by a loss; the loss must be a weighted sum of losses");
        if (rhs->number == 0.0)
          return fail("divides by zero");
        product->scale(1.0 / rhs->number);
      } else if (rhs->isNumber()) {
        product->scale(rhs->number);
      } else if (product->isNumber()) {
        rhs->scale(product->number);
        product = std::move(rhs);
      } else {
        return fail("multiplies two losses; the loss must be a weighted sum of losses");
      }
    }
    return product;
  }

  FailureOr<LinearLoss> parseFactor() {
    skipSpace();
    if (consume('-')) {
      FailureOr<LinearLoss> negated = parseFactor();
      if (succeeded(negated))
        negated->scale(-1.0);
      return negated;
    }
    if (consume('(')) {
      FailureOr<LinearLoss> inner = parseSum();
      if (succeeded(inner) && !consume(')'))
        return fail("a '(' is not closed");
      return inner;
    }
    if (pos_ < text_.size() && (llvm::isDigit(text_[pos_]) || text_[pos_] == '.')) {
      std::string rest = text_.drop_front(pos_).str();
      char *end = nullptr;
      double value = std::strtod(rest.c_str(), &end);
      if (end == rest.c_str() || !std::isfinite(value))
        return fail("'" + rest + "' is not a number");
      pos_ += end - rest.c_str();
      LinearLoss number;
      number.number = value;
      return number;
    }
    size_t start = pos_;
    while (pos_ < text_.size() && (llvm::isAlnum(text_[pos_]) || text_[pos_] == '_'))
      ++pos_;
    StringRef kind = text_.slice(start, pos_);
    if (kind != "cross_entropy" && kind != "mse" && kind != "output")
      return fail(kind.empty() ? "expected a loss at '" + text_.drop_front(start).str() + "'"
                               : "unknown loss '" + kind.str() + "' (expected cross_entropy, mse or output(NAME))");
    LossCall call{kind.str(), "", ""};
    if (consume('(')) {
      SmallVector<std::string, 2> arguments;
      do {
        size_t first = pos_;
        while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != ')')
          ++pos_;
        arguments.push_back(text_.slice(first, pos_).trim().str());
        if (arguments.back().empty())
          return fail(kind.str() + "(...) has an empty name");
      } while (consume(','));
      if (!consume(')'))
        return fail(kind.str() + "( is not closed");
      size_t most = kind == "output" ? 1 : 2;
      if (arguments.size() > most)
        return fail(kind.str() + "(...) takes " + (most == 1 ? "one name" : "an output and its labels") + ", got " +
                    std::to_string(arguments.size()));
      call.output = arguments[0];
      if (arguments.size() == 2)
        call.labels = arguments[1];
    } else if (kind == "output") {
      return fail("output needs the name of the model output that is the loss: output(NAME)");
    }
    LinearLoss loss;
    loss.calls.push_back({1.0, std::move(call)});
    return loss;
  }

  StringRef text_;
  size_t pos_ = 0;
  std::string error_;
};

struct GraphAppendLossPass : public fsdpc::graph::impl::GraphAppendLossBase<GraphAppendLossPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp forward = lookupFunction(module, kForwardFunc, "graph-append-loss");
    if (!forward)
      return signalPassFailure();
    if (forward.getNumResults() == 0) {
      forward.emitError("graph-append-loss: the model has no outputs");
      return signalPassFailure();
    }
    unsigned numOutputs = 0; // the model's outputs; buffer updates follow
    while (numOutputs < forward.getNumResults() && !isBufferUpdate(forward, numOutputs))
      ++numOutputs;
    SmallVector<std::string> outputNames;
    for (unsigned i = 0; i < numOutputs; ++i) {
      auto attr = forward.getResultAttrOfType<StringAttr>(i, kOutputAttr);
      outputNames.push_back(attr ? attr.getValue().str() : "#" + std::to_string(i));
    }

    // Decide which losses of which outputs.
    std::string text = loss;
    if (text == "auto") {
      auto type = cast<RankedTensorType>(forward.getResultTypes()[0]);
      text = numOutputs == 1 && type.getRank() == 0 ? "output:" + outputNames[0] : "cross_entropy";
    }
    std::string error;
    FailureOr<LinearLoss> parsed = LossParser(text).parse(error);
    if (failed(parsed)) {
      module.emitError() << "graph-append-loss: --loss '" << text << "' " << error;
      return signalPassFailure();
    }
    const bool globalMean = lossMean == "global";
    if (!globalMean && lossMean != "local") {
      module.emitError() << "graph-append-loss: --loss-mean must be local or global, got '" << lossMean << "'";
      return signalPassFailure();
    }
    if (globalMean &&
        llvm::none_of(parsed->calls, [](const auto &entry) { return entry.second.kind == "cross_entropy"; })) {
      module.emitError()
          << "graph-append-loss: --loss-mean global divides a cross entropy by the labels it counts over "
             "the step; the loss '"
          << text << "' has none";
      return signalPassFailure();
    }
    if (ranks < 1 || microBatches < 1) {
      module.emitError() << "graph-append-loss: ranks and micro-batches must be at least 1";
      return signalPassFailure();
    }
    SmallVector<unsigned> outputIndices;
    bool readsUnnamedOutput = false;
    for (auto &[weight, call] : parsed->calls) {
      readsUnnamedOutput |= call.output.empty();
      unsigned index = 0;
      if (!call.output.empty()) {
        index = numOutputs;
        for (unsigned i = 0; i < numOutputs; ++i)
          if (outputNames[i] == call.output)
            index = i;
        if (index == numOutputs) {
          std::string names;
          for (unsigned i = 0; i < numOutputs; ++i)
            names += (i ? ", " : "") + outputNames[i];
          forward.emitError() << "graph-append-loss: --loss names no model output '" << call.output
                              << "' (the outputs: " << names << ")";
          return signalPassFailure();
        }
      }
      outputIndices.push_back(index);
    }
    if (readsUnnamedOutput && numOutputs > 1)
      forward.emitWarning() << "graph-append-loss: the loss reads the first of the model's " << numOutputs
                            << " outputs, '" << outputNames[0] << "'; a loss over others names them, as in --loss '("
                            << "cross_entropy(" << outputNames[0] << ", LABELS) + cross_entropy(" << outputNames[1]
                            << ", LABELS)) / 2'";

    func::FuncOp train = forward.clone();
    train.setSymName(kTrainStepFunc);
    module.insert(std::next(Block::iterator(forward)), train);
    forward.erase();

    OpBuilder builder(train.getBody().front().getTerminator());
    Location loc = NameLoc::get(builder.getStringAttr("loss"));
    auto scalarType = RankedTensorType::get({}, builder.getF32Type());
    // The labels inputs by name: two losses may read the same labels.
    llvm::StringMap<Value> labelInputs, labelCounts;
    auto labelsInput = [&](const std::string &name, RankedTensorType type) -> FailureOr<Value> {
      for (unsigned i = 0; i < train.getNumArguments(); ++i)
        if (auto input = train.getArgAttrOfType<StringAttr>(i, kInputAttr);
            input && input.getValue() == name && !train.getArgAttr(i, kLabelAttr))
          return train.emitError() << "graph-append-loss: the labels '" << name
                                   << "' have the name of a model input; name them otherwise in --loss";
      Value &labels = labelInputs[name];
      if (!labels) {
        auto attrs = builder.getDictionaryAttr({builder.getNamedAttr(kInputAttr, builder.getStringAttr(name)),
                                                builder.getNamedAttr(kLabelAttr, builder.getUnitAttr())});
        labels = appendArgument(train, type, attrs);
      } else if (labels.getType() != type) {
        return train.emitError() << "graph-append-loss: the labels '" << name << "' are read as " << labels.getType()
                                 << " and as " << type;
      }
      return labels;
    };

    Value lossValue;
    int64_t numClasses = 0;
    bool predictionMarked = false; // the output fsdp-run --forward writes: the first a loss predicts
    Operation *terminator = train.getBody().front().getTerminator();
    for (auto [entry, outputIndex] : llvm::zip(parsed->calls, outputIndices)) {
      auto &[weight, call] = entry;
      Value output = terminator->getOperand(outputIndex);
      auto outputType = cast<RankedTensorType>(output.getType());
      if (Operation *producer = output.getDefiningOp(); producer && call.kind != "output" && !predictionMarked)
        if (auto name = train.getResultAttrOfType<StringAttr>(outputIndex, kOutputAttr)) {
          producer->setAttr(kPredictionAttr, name);
          predictionMarked = true;
        }
      std::string labelsName = call.labels.empty() ? "labels" : call.labels;
      Value term;
      if (call.kind == "output") {
        if (outputType.getRank() != 0 || !outputType.getElementType().isF32()) {
          train.emitError() << "graph-append-loss: the loss output '" << outputNames[outputIndex]
                            << "' must be a scalar f32, got " << outputType;
          return signalPassFailure();
        }
        term = output;
      } else if (call.kind == "cross_entropy") {
        if (outputType.getRank() != 2 && outputType.getRank() != 3) {
          train.emitError() << "graph-append-loss: cross_entropy needs logits [B, C] or [B, T, C], the model output '"
                            << outputNames[outputIndex] << "' is " << outputType
                            << "; pass --loss mse or --loss output:NAME";
          return signalPassFailure();
        }
        ArrayRef<int64_t> shape = outputType.getShape();
        numClasses = shape.back();
        FailureOr<Value> labels =
            labelsInput(labelsName, RankedTensorType::get(shape.drop_back(), builder.getI64Type()));
        if (failed(labels))
          return signalPassFailure();
        Value logits = output, rows = *labels;
        if (outputType.getRank() == 3) {
          int64_t count = shape[0] * shape[1];
          logits =
              ReshapeOp::create(builder, loc, RankedTensorType::get({count, numClasses}, builder.getF32Type()), logits);
          rows = ReshapeOp::create(builder, loc, RankedTensorType::get({count}, builder.getI64Type()), rows);
        }
        // torch's F.cross_entropy: the mean over the labels that are not
        // -100, the value Hugging Face's collators give padding positions
        // and the tokens a masked LM does not predict. Globally (transformers'
        // Trainer), the sum over them divided by their count over the whole
        // step, times the ranks and micro-batches whose gradients the step
        // averages, so that the average is the step's token mean.
        auto reduction =
            LossReductionAttr::get(builder.getContext(), globalMean ? LossReduction::sum : LossReduction::mean);
        term = SoftmaxCrossEntropyOp::create(builder, loc, scalarType, logits, rows, reduction,
                                             builder.getI64IntegerAttr(kTorchIgnoreIndex), IntegerAttr());
        if (globalMean) {
          if (int64_t averaged = ranks * microBatches; averaged != 1)
            term = ScaleOp::create(builder, loc, term, builder.getF64FloatAttr(static_cast<double>(averaged)));
          Value &counted = labelCounts[labelsName]; // the count as f32, once per labels
          if (!counted) {
            Value count = appendArgument(
                train, RankedTensorType::get({}, builder.getI64Type()),
                builder.getDictionaryAttr(builder.getNamedAttr(kLabelCountAttr, builder.getStringAttr(labelsName))));
            counted = CastOp::create(builder, loc, scalarType, count);
          }
          term = DivOp::create(builder, loc, scalarType, term, counted);
        }
      } else {
        FailureOr<Value> labels = labelsInput(labelsName, outputType);
        if (failed(labels))
          return signalPassFailure();
        term = MseLossOp::create(builder, loc, scalarType, output, *labels);
      }
      if (weight != 1.0)
        term = ScaleOp::create(builder, loc, term, builder.getF64FloatAttr(weight));
      lossValue = lossValue ? AddOp::create(builder, loc, scalarType, lossValue, term).getResult() : term;
    }

    SmallVector<Value> returned = {lossValue};
    SmallVector<DictionaryAttr> attrs = {builder.getDictionaryAttr(builder.getNamedAttr(kLossAttr, builder.getUnitAttr()))};
    appendBufferUpdates(train, returned, attrs);
    setReturnedValues(train, returned, attrs);
    // One loss names its kind (and synthetic data can make its labels);
    // several are `combined`.
    bool single = parsed->calls.size() == 1;
    module->setAttr(kLossKindAttr, builder.getStringAttr(single ? parsed->calls.front().second.kind : "combined"));
    module->setAttr(kNumClassesAttr, builder.getI64IntegerAttr(single ? numClasses : 0));
  }
};

} // namespace
