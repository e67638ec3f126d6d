// Chunked conversion between a tensor's element type and float32 lanes for the vectorized loops (lane_table.h).
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/lane_table.h"

namespace quark::kernels {

/// Elements per chunk: small enough for L1, a multiple of the MX block (32).
inline constexpr int64_t kLanes = 512;

inline void LoadLanes(const float* x, float* v, int64_t n, const LaneTable&) { std::memcpy(v, x, n * sizeof(float)); }
inline void LoadLanes(const c10::BFloat16* x, float* v, int64_t n, const LaneTable& t) {
  t.load_bf16(reinterpret_cast<const uint16_t*>(x), v, n);
}
inline void LoadLanes(const c10::Half* x, float* v, int64_t n, const LaneTable& t) {
  t.load_f16(reinterpret_cast<const uint16_t*>(x), v, n);
}

inline void StoreLanes(const float* v, float* y, int64_t n, const LaneTable&) { std::memcpy(y, v, n * sizeof(float)); }
inline void StoreLanes(const float* v, c10::BFloat16* y, int64_t n, const LaneTable& t) {
  t.store_bf16(v, reinterpret_cast<uint16_t*>(y), n);
}
inline void StoreLanes(const float* v, c10::Half* y, int64_t n, const LaneTable& t) {
  t.store_f16(v, reinterpret_cast<uint16_t*>(y), n);
}

/// Loads [b, e) of x in chunks of kLanes, applies op(buffer, n, offset) and stores the chunk to y.
template <typename T, typename Op>
void ForEachChunk(const T* x, T* y, int64_t b, int64_t e, const LaneTable& t, Op op) {
  alignas(64) float buf[kLanes];
  for (int64_t i = b; i < e; i += kLanes) {
    const int64_t n = e - i < kLanes ? e - i : kLanes;
    LoadLanes(x + i, buf, n, t);
    op(buf, n, i);
    StoreLanes(buf, y + i, n, t);
  }
}

}  // namespace quark::kernels
