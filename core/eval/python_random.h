// Python's random.Random, as far as lm-evaluation-harness's few-shot sampler uses it: seeding by an integer
// (CPython's random_seed: the absolute value as 32-bit words into MT19937's init_by_array), getrandbits(k <= 32),
// _randbelow_with_getrandbits and sample(population, k) (CPython 3.11's algorithm: a pool for small populations, a
// set of picked indices for large ones). Bit-exact to CPython for these calls.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace quark::eval {

class PythonRandom {
 public:
  /// random.Random(seed).
  explicit PythonRandom(uint64_t seed);
  /// A 32-bit output of MT19937 (CPython's genrand_uint32).
  uint32_t NextUint32();
  /// getrandbits(k), 1 <= k <= 32.
  uint32_t GetRandBits(int k);
  /// _randbelow(n): uniform in [0, n), n >= 1.
  uint64_t RandBelow(uint64_t n);
  /// The indices random.sample(range(n), k) returns, in order; requires 0 <= k <= n.
  std::vector<int64_t> Sample(int64_t n, int64_t k);

 private:
  static constexpr int kN = 624;
  std::array<uint32_t, kN> mt_{};
  int index_ = kN;
};

}  // namespace quark::eval
