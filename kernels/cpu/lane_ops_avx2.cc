// The lane loops compiled for AVX2 / FMA / F16C (this file only; see CMakeLists.txt). No c10 or ATen here.
#define QUARK_LANE_NS avx2
#include "kernels/cpu/lane_ops.h"

#include "kernels/cpu/bf16_lanes_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace quark::kernels {
namespace {

void LoadF16(const uint16_t* x, float* v, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(v + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < n; ++i) v[i] = _cvtsh_ss(x[i]);
}

void StoreF16(const float* v, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(v + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) y[i] = _cvtss_sh(v[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

void CopyF32(const float* x, float* v, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(v + i, _mm256_loadu_ps(x + i));
  for (; i < n; ++i) v[i] = x[i];
}

void StreamCopy(const void* src, void* dst, int64_t bytes) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  // Non-temporal stores need 32-byte aligned destinations: the unaligned head and the tail are copied plainly.
  const int64_t head = std::min<int64_t>(bytes, (32 - static_cast<int64_t>(reinterpret_cast<uintptr_t>(d) & 31)) & 31);
  std::memcpy(d, s, static_cast<size_t>(head));
  int64_t i = head;
  for (; i + 32 <= bytes; i += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
  }
  std::memcpy(d + i, s + i, static_cast<size_t>(bytes - i));
  // Non-temporal stores are weakly ordered: fence them before another thread may read the output.
  _mm_sfence();
}

// Unpacks, shuffles and lane permutes: data moves only, so every bit (NaN payloads, signed zeros) is kept.
void Transpose8x8(const float* const* src, float* const* dst, bool only_changed) {
  __m256 r[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src[k]);
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 out[8] = {
      _mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
      _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
      _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
      _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31),
  };
  if (only_changed) {
    __m256i differ = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i held = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dst[k]));
      differ = _mm256_or_si256(differ, _mm256_xor_si256(held, _mm256_castps_si256(out[k])));
    }
    if (_mm256_testz_si256(differ, differ)) return;
  }
  for (int k = 0; k < 8; ++k) _mm256_storeu_ps(dst[k], out[k]);
}

}  // namespace

const LaneTable* Avx2LaneTable() {
  static const LaneTable table = [] {
    LaneTable t = avx2::MakeTable(&LoadF16, &StoreF16, &CopyF32, &StreamCopy);
    t.transpose8x8 = &Transpose8x8;
    t.bf16 = HandWrittenAvx2Bf16Lanes(t.bf16);
    return t;
  }();
  return &table;
}

}  // namespace quark::kernels
