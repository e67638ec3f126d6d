#include "core/export/gguf_mxfp4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace quark::exporter::gguf {
namespace {

// kvalues_mxfp4 (ggml-common.h): the E2M1 values doubled, so that a block's scale is 2^(e - 128).
constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ggml_e8m0_to_fp32_half: 2^(e - 128), built from the bit pattern (subnormal for e < 2).
float E8m0ToFp32Half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// best_index_mxfp4: the code nearest to x, the lowest index on a tie.
uint8_t BestIndex(float x, float d) {
  int best = 0;
  float best_err = std::fabs(kValues[0] * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kValues[i] * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

void QuantizeRowMxfp4Ref(const float* x, BlockMxfp4* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float* xb = x + i * kBlockSize;
    float amax = 0.0f;
    for (int j = 0; j < kBlockSize; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
    const float d = E8m0ToFp32Half(e);
    y[i].e = e;
    for (int j = 0; j < kBlockSize / 2; ++j) {
      y[i].qs[j] = static_cast<uint8_t>(BestIndex(xb[j], d) | (BestIndex(xb[j + kBlockSize / 2], d) << 4));
    }
  }
}

void DequantizeRowMxfp4(const BlockMxfp4* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float d = E8m0ToFp32Half(x[i].e);
    for (int j = 0; j < kBlockSize / 2; ++j) {
      y[i * kBlockSize + j] = kValues[x[i].qs[j] & 0x0F] * d;
      y[i * kBlockSize + j + kBlockSize / 2] = kValues[x[i].qs[j] >> 4] * d;
    }
  }
}

}  // namespace quark::exporter::gguf
