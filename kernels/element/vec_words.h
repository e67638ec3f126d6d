// A 16-byte vector as the CUDA kernels load and store it: four little-endian 32-bit words holding elements of 1, 2
// or 4 bytes. Plain __host__ __device__ code, so the CPU tests check the unpacking and packing the GPU does.
#pragma once

#include <cstdint>

#ifndef QUARK_HD
#if defined(__CUDACC__)
#define QUARK_HD __host__ __device__ __forceinline__
#else
#define QUARK_HD inline
#endif
#endif

namespace quark::kernels::element {

/// The bits of element k (of kBytes bytes) of the vector held in w: element k starts at byte k * kBytes.
template <int kBytes>
QUARK_HD uint32_t WordElement(const uint32_t (&w)[4], int k) {
  if constexpr (kBytes == 4) {
    return w[k];
  } else {
    return (w[k * kBytes / 4] >> (8 * ((k * kBytes) % 4))) & ((1u << (8 * kBytes)) - 1u);
  }
}

/// kWidth elements of kBytes each, packed into the words one aligned store writes (4, 8 or 16 bytes).
template <int kBytes, int kWidth>
struct PackedWords {
  static constexpr int kWords = (kWidth * kBytes + 3) / 4;
  uint32_t w[kWords] = {};
  /// Element k's bits (only the low 8 * kBytes count). Each k is set once.
  QUARK_HD void Set(int k, uint32_t bits) {
    if constexpr (kBytes == 4) {
      w[k] = bits;
    } else {
      w[k * kBytes / 4] |= (bits & ((1u << (8 * kBytes)) - 1u)) << (8 * ((k * kBytes) % 4));
    }
  }
};

}  // namespace quark::kernels::element
