//===- SinusoidalTable.cpp - Fixed sinusoidal position tables -------------===//
//
// A column is a sine when its row 0 is exactly 0, a cosine when it is 1.
// Row 1 gives the frequency roughly; rows 2, 4, 8, ... and the last refine
// it, each phase chosen among the angles with the observed sine or cosine
// as the one nearest to the phase the estimate so far predicts (a cosine's
// low frequency reads as 0 from row 1 alone: cos(1e-4) is 1 in float32).
// A row whose value is near an extremum (a sine near +-1, a cosine near
// +-1) says little of its phase and is passed over. Then every row must
// agree with the refined frequency.
//
//===----------------------------------------------------------------------===//
#include "SinusoidalTable.h"

#include <algorithm>
#include <cmath>

namespace fsdpc::import {

namespace {

constexpr double kPi = 3.14159265358979323846;

/// The angle nearest to `predicted` whose sine (or cosine) is `value`.
double nearestPhase(double value, bool sine, double predicted) {
  const double principal =
      sine ? std::asin(std::fmax(-1.0, std::fmin(1.0, value))) : std::acos(std::fmax(-1.0, std::fmin(1.0, value)));
  // The other angle in a period with the same sine (pi - a) or cosine (-a).
  const double mirrored = sine ? kPi - principal : -principal;
  double best = principal, bestDistance = INFINITY;
  for (double base : {principal, mirrored}) {
    double turns = std::round((predicted - base) / (2 * kPi));
    double candidate = base + 2 * kPi * turns;
    if (std::fabs(candidate - predicted) < bestDistance) {
      best = candidate;
      bestDistance = std::fabs(candidate - predicted);
    }
  }
  return best;
}

} // namespace

bool isSinusoidalPositionTable(const std::vector<float> &table, llvm::ArrayRef<int64_t> shape) {
  if (shape.size() != 2 || shape[0] < 4 || shape[1] < 2)
    return false;
  const int64_t rows = shape[0], width = shape[1];
  int64_t varying = 0;
  for (int64_t j = 0; j < width; ++j) {
    auto at = [&](int64_t p) { return static_cast<double>(table[p * width + j]); };
    const bool sine = at(0) == 0.0;
    if (!sine && at(0) != 1.0)
      return false;
    // How well a phase is read from its value: the slope of sin or cos there.
    auto slope = [&](double phase) { return std::fabs(sine ? std::cos(phase) : std::sin(phase)); };
    double frequency = std::fabs(nearestPhase(at(1), sine, 0.0)); // a cosine's angle up to its sign
    double estimateSlope = slope(frequency);
    for (int64_t p = 2;; p = std::min(2 * p, rows - 1)) {
      const double phase = nearestPhase(at(p), sine, p * frequency);
      if (slope(phase) > std::min(0.5, estimateSlope)) {
        frequency = phase / p;
        estimateSlope = slope(phase);
      }
      if (p == rows - 1)
        break;
    }
    if (!(frequency >= 0 && frequency < kPi))
      return false;
    for (int64_t p = 0; p < rows; ++p) {
      const double phase = p * frequency;
      const double expected = sine ? std::sin(phase) : std::cos(phase);
      // float32 values, and phases a float32 product may have rounded.
      if (std::fabs(at(p) - expected) > 1e-5 + 2e-7 * phase)
        return false;
    }
    varying += at(1) != at(0);
  }
  return 2 * varying >= width;
}

} // namespace fsdpc::import
