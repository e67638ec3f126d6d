#include "core/eval/python_random.h"

#include <cmath>
#include <unordered_set>

namespace quark::eval {
namespace {

constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu, kUpperMask = 0x80000000u, kLowerMask = 0x7fffffffu;

int BitLength(uint64_t n) {
  int bits = 0;
  while (n != 0) {
    ++bits;
    n >>= 1;
  }
  return bits;
}

}  // namespace

PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key;
  for (uint64_t n = seed; n != 0; n >>= 32) key.push_back(static_cast<uint32_t>(n));
  if (key.empty()) key.push_back(0);
  // init_genrand(19650218), then init_by_array(key).
  mt_[0] = 19650218u;
  for (int i = 1; i < kN; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  int i = 1;
  size_t j = 0;
  for (size_t k = std::max<size_t>(kN, key.size()); k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
  index_ = kN;
}

uint32_t PythonRandom::NextUint32() {
  if (index_ >= kN) {
    for (int k = 0; k < kN; ++k) {
      const uint32_t y = (mt_[k] & kUpperMask) | (mt_[(k + 1) % kN] & kLowerMask);
      mt_[k] = mt_[(k + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    }
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint32_t PythonRandom::GetRandBits(int k) { return NextUint32() >> (32 - k); }

uint64_t PythonRandom::RandBelow(uint64_t n) {
  const int k = BitLength(n);
  uint64_t r = GetRandBits(k);
  while (r >= n) r = GetRandBits(k);
  return r;
}

std::vector<int64_t> PythonRandom::Sample(int64_t n, int64_t k) {
  std::vector<int64_t> result(static_cast<size_t>(k));
  int64_t setsize = 21;
  if (k > 5) setsize += static_cast<int64_t>(std::pow(4.0, std::ceil(std::log(static_cast<double>(k * 3)) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<int64_t> pool(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pool[i] = i;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = static_cast<int64_t>(RandBelow(static_cast<uint64_t>(n - i)));
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];
    }
    return result;
  }
  std::unordered_set<int64_t> selected;
  for (int64_t i = 0; i < k; ++i) {
    int64_t j = static_cast<int64_t>(RandBelow(static_cast<uint64_t>(n)));
    while (selected.count(j) != 0) j = static_cast<int64_t>(RandBelow(static_cast<uint64_t>(n)));
    selected.insert(j);
    result[i] = j;
  }
  return result;
}

}  // namespace quark::eval
