// Chunked conversion between a tensor's element type and float32 lanes for the vectorized loops (lane_table.h).
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>

#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cpu/channel_loops.h"
#include "kernels/cpu/lane_table.h"

namespace quark::kernels {

/// Elements per chunk: small enough for L1, a multiple of the MX block (32).
inline constexpr int64_t kLanes = 512;

inline void LoadLanes(const float* x, float* v, int64_t n, const LaneTable& t) { t.copy_f32(x, v, n); }
inline void LoadLanes(const c10::BFloat16* x, float* v, int64_t n, const LaneTable& t) {
  t.load_bf16(reinterpret_cast<const uint16_t*>(x), v, n);
}
inline void LoadLanes(const c10::Half* x, float* v, int64_t n, const LaneTable& t) {
  t.load_f16(reinterpret_cast<const uint16_t*>(x), v, n);
}

// Only float32 outputs are streamed (see kStreamOutputBytes).
inline void StoreLanes(const float* v, float* y, int64_t n, const LaneIo& io) {
  if (io.stream) {
    io.t().stream_copy(v, y, n * static_cast<int64_t>(sizeof(float)));
  } else {
    io.t().copy_f32(v, y, n);
  }
}
inline void StoreLanes(const float* v, c10::BFloat16* y, int64_t n, const LaneIo& io) {
  io.t().store_bf16(v, reinterpret_cast<uint16_t*>(y), n);
}
inline void StoreLanes(const float* v, c10::Half* y, int64_t n, const LaneIo& io) {
  io.t().store_f16(v, reinterpret_cast<uint16_t*>(y), n);
}

/// Loads [b, e) of x in chunks of kLanes, applies op(buffer, n, offset) and stores the chunk to y.
template <typename T, typename Op>
void ForEachChunk(const T* x, T* y, int64_t b, int64_t e, const LaneIo& io, Op op) {
  alignas(64) float buf[kLanes];
  for (int64_t i = b; i < e; i += kLanes) {
    const int64_t n = e - i < kLanes ? e - i : kLanes;
    LoadLanes(x + i, buf, n, io.t());
    op(buf, n, i);
    StoreLanes(buf, y + i, n, io);
  }
}

/// Quantizes [b, e) of x into y chunk by chunk: bfloat16 data in one pass through registers with
/// fused(in_bits, out_bits, n) (Bf16LaneTable), any other dtype through the float32 buffer with lanes(v, n).
template <typename T, typename Fused, typename Lanes>
void QuantizeChunks(const T* x, T* y, int64_t b, int64_t e, const LaneIo& io, Fused fused, Lanes lanes) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    const auto* in = reinterpret_cast<const uint16_t*>(x);
    auto* out = reinterpret_cast<uint16_t*>(y);
    for (int64_t i = b; i < e; i += kLanes) fused(in + i, out + i, e - i < kLanes ? e - i : kLanes);
  } else {
    ForEachChunk(x, y, b, e, io, [&](float* v, int64_t n, int64_t) { lanes(v, n); });
  }
}

/// Short segments (per_group, per-token rows shorter than a chunk) of a [1, channels, inner] layout: calls
/// span(begin, end) on element ranges of whole segments, at most kLanes long, in parallel; the first channel of a
/// span is begin / inner. Returns false (nothing done) when the layout is not of that kind.
template <typename Span>
bool ForEachGroupSpan(const ChannelLayout& l, Span span) {
  if (l.outer != 1 || l.inner <= 1 || l.inner > kLanes / 2) return false;
  const int64_t per_chunk = (kLanes / l.inner) * l.inner;
  const int64_t n = l.Numel();
  const int64_t chunks = (n + per_chunk - 1) / per_chunk;
  at::parallel_for(0, chunks, std::max<int64_t>(1, kElementGrain / per_chunk), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) span(k * per_chunk, std::min(n, (k + 1) * per_chunk));
  });
  return true;
}

}  // namespace quark::kernels
