//===- Random.h - Deterministic random numbers ------------------*- C++ -*-===//
//
// Counter-based generators, identical on every platform and rank, so that a
// synthetic sample or an initial weight depends only on its seed and index,
// never on how the run is sharded.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_RANDOM_H
#define FSDPC_RUNTIME_RANDOM_H

#include <cmath>
#include <cstdint>

namespace fsdpc::runtime {

/// SplitMix64: one 64-bit output per counter value.
inline uint64_t splitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Standard normal samples by Box-Muller on two uniforms in (0, 1].
class NormalStream {
public:
  explicit NormalStream(uint64_t seed) : state_(seed) {}
  float next() {
    double u1 = (static_cast<double>(splitMix64(state_++) >> 11) + 1.0) / 9007199254740992.0;
    double u2 = static_cast<double>(splitMix64(state_++) >> 11) / 9007199254740992.0;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

private:
  uint64_t state_;
};

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_RANDOM_H
