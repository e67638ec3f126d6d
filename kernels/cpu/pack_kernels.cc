#include "kernels/cpu/pack_kernels.h"

#include <ATen/Parallel.h>

#include "kernels/element/element_ops.h"

namespace quark::kernels {
namespace {
constexpr int64_t kGroupGrain = 1 << 13;
}  // namespace

void PackInt4(const uint8_t* codes, int64_t n, const Int4Order& order, int32_t* words) {
  at::parallel_for(0, n / 8, kGroupGrain, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      words[w] = element::PackInt4Word(codes + w * 8, order.data());
    }
  });
}

void UnpackInt4(const int32_t* words, int64_t n, const Int4Order& order, bool sign_extend, uint8_t* codes) {
  at::parallel_for(0, n / 8, kGroupGrain, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      const auto v = static_cast<uint32_t>(words[w]);
      for (int i = 0; i < 8; ++i) {
        uint32_t nib = (v >> (4 * i)) & 0xFu;
        if (sign_extend && nib >= 8) nib |= 0xF0u;
        codes[w * 8 + order[i]] = static_cast<uint8_t>(nib);
      }
    }
  });
}

void PackFp4(const uint8_t* codes, int64_t n, uint8_t* bytes) {
  at::parallel_for(0, n / 2, kGroupGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      bytes[i] = element::PackFp4Byte(codes[2 * i], codes[2 * i + 1]);
    }
  });
}

void UnpackFp4(const uint8_t* bytes, int64_t n, uint8_t* codes) {
  at::parallel_for(0, n / 2, kGroupGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      codes[2 * i] = bytes[i] & 0xFu;
      codes[2 * i + 1] = bytes[i] >> 4;
    }
  });
}

void PackFp6(const uint8_t* codes, int64_t n, uint8_t* bytes) {
  at::parallel_for(0, n / 4, kGroupGrain, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      const uint8_t* c = codes + 4 * g;
      const uint32_t v = (c[0] & 0x3Fu) | ((c[1] & 0x3Fu) << 6) | ((c[2] & 0x3Fu) << 12) | ((c[3] & 0x3Fu) << 18);
      bytes[3 * g] = static_cast<uint8_t>(v);
      bytes[3 * g + 1] = static_cast<uint8_t>(v >> 8);
      bytes[3 * g + 2] = static_cast<uint8_t>(v >> 16);
    }
  });
}

void UnpackFp6(const uint8_t* bytes, int64_t n, uint8_t* codes) {
  at::parallel_for(0, n / 4, kGroupGrain, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      const uint32_t v = bytes[3 * g] | (static_cast<uint32_t>(bytes[3 * g + 1]) << 8) |
                         (static_cast<uint32_t>(bytes[3 * g + 2]) << 16);
      for (int k = 0; k < 4; ++k) codes[4 * g + k] = static_cast<uint8_t>((v >> (6 * k)) & 0x3Fu);
    }
  });
}

}  // namespace quark::kernels
