// The lane loops compiled for AVX2 / FMA / F16C (this file only; see CMakeLists.txt). No c10 or ATen here.
#define QUARK_LANE_NS avx2
#include "kernels/cpu/lane_ops.h"

#include <immintrin.h>

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

}  // namespace

const LaneTable* Avx2LaneTable() {
  static const LaneTable table = avx2::MakeTable(&LoadF16, &StoreF16);
  return &table;
}

}  // namespace quark::kernels
