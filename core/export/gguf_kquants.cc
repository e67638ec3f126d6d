#include "core/export/gguf_kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/export/gguf_blocks.h"
#include "core/export/gguf_kquant_search.h"

// Q2_K..Q6_K quantizers, ported from ggml-quants.c (ggml-org/llama.cpp, MIT) loop for loop: the reference
// (quantize_row_*_ref) and the imatrix (quantize_row_*_impl) versions, which share the requantization from the
// fp16-rounded d / dmin and the bit packing. Built with -ffp-contract=off (see gguf_blocks.cc).

namespace quark::exporter::gguf {
namespace {

using kquant::NearestInt;

constexpr int kSub16 = kQkK / 16;  // sub-blocks of 16 (Q2_K, Q3_K, Q6_K)
constexpr int kSub32 = kQkK / 32;  // sub-blocks of 32 (Q4_K, Q5_K)

// Four 2-bit codes per byte: element 128h + 32k + l at bits 2k of qs[32h + l].
void Pack2Bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQkK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6);
    }
  }
}

// Importance weights of the n values of a sub-block: qw·√(σ² + x²); returns their sum (in order, as ggml's sw).
float SubBlockWeights(const float* x, const float* qw, float sigma2, int n, float* w) {
  for (int l = 0; l < n; ++l) w[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
  float sum = 0;
  for (int l = 0; l < n; ++l) sum += w[l];
  return sum;
}

// ---- Q2_K

// Codes from the stored scales: l = clamp(nearest_int((x + dmin·m) / (d·sc)), 0, 3); sub-blocks with d·sc = 0 keep
// the search's codes.
void FinishQ2_K(const float* x, BlockQ2_K* y, uint8_t* L) {
  for (int j = 0; j < kSub16; ++j) {
    const float d = Fp16ToFp32(y->d) * (y->scales[j] & 0xF);
    if (!d) continue;
    const float dm = Fp16ToFp32(y->dmin) * (y->scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = std::clamp(NearestInt((x[16 * j + ii] + dm) / d), 0, 3);
  }
  Pack2Bit(L, y->qs);
}

void Q2_KBlockRef(const float* x, BlockQ2_K* y) {
  uint8_t L[kQkK], Laux[16];
  float weights[16], mins[kSub16], scales[kSub16];
  const float q4scale = 15.f;
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kSub16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = kquant::MakeQkx2Quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  if (max_scale > 0) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < kSub16; ++j) y->scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
    y->d = Fp32ToFp16(max_scale / q4scale);
  } else {
    for (int j = 0; j < kSub16; ++j) y->scales[j] = 0;
    y->d = Fp32ToFp16(0.f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < kSub16; ++j) y->scales[j] |= static_cast<uint8_t>(NearestInt(iscale * mins[j]) << 4);
    y->dmin = Fp32ToFp16(max_min / q4scale);
  } else {
    y->dmin = Fp32ToFp16(0.f);
  }
  FinishQ2_K(x, y, L);
}

void Q2_KBlockImatrix(const float* x, BlockQ2_K* y, const float* qw) {
  uint8_t L[kQkK], Laux[16], Ls[kSub16], Lm[kSub16];
  float mins[kSub16], scales[kSub16], sw[kSub16], weight[16];
  float sumx2 = 0;
  for (int j = 0; j < kQkK; ++j) sumx2 += x[j] * x[j];
  const float sigma2 = sumx2 / kQkK;
  for (int j = 0; j < kSub16; ++j) {
    sw[j] = SubBlockWeights(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
    scales[j] = kquant::MakeQkx3Quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
  }
  const float dm = kquant::MakeQpQuants(kSub16, 15, scales, Ls, sw);
  const float mm = kquant::MakeQpQuants(kSub16, 15, mins, Lm, sw);
  y->d = Fp32ToFp16(dm);
  y->dmin = Fp32ToFp16(mm);
  for (int j = 0; j < kSub16; ++j) y->scales[j] = Ls[j] | (Lm[j] << 4);
  FinishQ2_K(x, y, L);
}

// ---- Q3_K

// Packs 6-bit code l (0..63) of sub-block j: low 4 bits in scales[j] or the high nibble of scales[j - 8], the top
// 2 bits in scales[8 + j % 4] at bit 2·(j / 4). `scales` must start zeroed.
void PutScaleQ3_K(int j, int l, uint8_t* scales) {
  if (j < 8) {
    scales[j] = l & 0xF;
  } else {
    scales[j - 8] |= ((l & 0xF) << 4);
  }
  l >>= 4;
  scales[j % 4 + 8] |= (l << (2 * (j / 4)));
}

void FinishQ3_K(const float* x, BlockQ3_K* y, int8_t* L) {
  for (int j = 0; j < kSub16; ++j) {
    int8_t sc = j < 8 ? y->scales[j] & 0xF : y->scales[j - 8] >> 4;
    sc = static_cast<int8_t>((sc | (((y->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
    const float d = Fp16ToFp32(y->d) * sc;
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = static_cast<int8_t>(std::clamp(NearestInt(x[16 * j + ii] / d), -4, 3) + 4);
  }
  // The high bit of the first 32 codes goes to bit 0 of hmask[0..31], the next 32 to bit 1, and so on.
  std::memset(y->hmask, 0, sizeof(y->hmask));
  int m = 0;
  uint8_t hm = 1;
  uint8_t low[kQkK];
  for (int j = 0; j < kQkK; ++j) {
    low[j] = static_cast<uint8_t>(L[j]);
    if (L[j] > 3) {
      y->hmask[m] |= hm;
      low[j] = static_cast<uint8_t>(L[j] - 4);
    }
    if (++m == kQkK / 8) {
      m = 0;
      hm <<= 1;
    }
  }
  Pack2Bit(low, y->qs);
}

void Q3_KBlockRef(const float* x, BlockQ3_K* y) {
  int8_t L[kQkK];
  float scales[kSub16];
  float max_scale = 0, amax = 0;
  for (int j = 0; j < kSub16; ++j) {
    scales[j] = kquant::MakeQ3Quants(16, 4, x + 16 * j, L + 16 * j, true);
    const float scale = std::fabs(scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = scales[j];
    }
  }
  std::memset(y->scales, 0, sizeof(y->scales));
  if (max_scale) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < kSub16; ++j) {
      int8_t l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
      l = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
      PutScaleQ3_K(j, l, y->scales);
    }
    y->d = Fp32ToFp16(1 / iscale);
  } else {
    y->d = Fp32ToFp16(0.f);
  }
  FinishQ3_K(x, y, L);
}

void Q3_KBlockImatrix(const float* x, BlockQ3_K* y, const float* qw) {
  int8_t L[kQkK], Ls[kSub16];
  float scales[kSub16], weight[16], sw[kSub16];
  float sumx2 = 0;
  for (int j = 0; j < kQkK; ++j) sumx2 += x[j] * x[j];
  const float sigma2 = 2 * sumx2 / kQkK;
  for (int j = 0; j < kSub16; ++j) {
    sw[j] = SubBlockWeights(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
    scales[j] = kquant::MakeQxQuants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
  }
  std::memset(y->scales, 0, sizeof(y->scales));
  const float d_block = kquant::MakeQxQuants(kSub16, 32, scales, Ls, 1, sw);
  for (int j = 0; j < kSub16; ++j) PutScaleQ3_K(j, Ls[j], y->scales);
  y->d = Fp32ToFp16(d_block);
  FinishQ3_K(x, y, L);
}

// ---- Q4_K and Q5_K (kNmax 15 or 31)

// Codes from the stored 6-bit scales and mins: l = clamp(nearest_int((x + dmin·m) / (d·sc)), 0, nmax).
template <int kNmax>
void RequantizeQ45(const float* x, uint16_t d16, uint16_t dmin16, const uint8_t* packed, uint8_t* L) {
  for (int j = 0; j < kSub32; ++j) {
    uint8_t sc, m;
    kquant::GetScaleMinK4(j, packed, &sc, &m);
    const float d = Fp16ToFp32(d16) * sc;
    if (!d) continue;
    const float dm = Fp16ToFp32(dmin16) * m;
    for (int ii = 0; ii < 32; ++ii) L[32 * j + ii] = std::clamp(NearestInt((x[32 * j + ii] + dm) / d), 0, kNmax);
  }
}

// Element 64c + l in the low nibble of qs[32c + l], 64c + 32 + l in the high one; Q5_K's fifth bits in qh bit 2c
// (first) and 2c + 1 (second).
void PackQ45(const uint8_t* L, uint8_t* qs, uint8_t* qh) {
  if (qh) std::memset(qh, 0, kQkK / 8);
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < kQkK; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j], l2 = L[n + j + 32];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] |= m1;
      }
      if (l2 > 15) {
        l2 -= 16;
        qh[j] |= m2;
      }
      qs[j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 <<= 2;
    m2 <<= 2;
    qs += 32;
  }
}

// The reference: per sub-block av_x + |x| weights, make_qkx2_quants, 6-bit scales relative to the largest.
template <int kNmax, typename Block>
void Q45BlockRef(const float* x, Block* y, float rmin, int nstep) {
  uint8_t L[kQkK], Laux[32];
  float weights[32], mins[kSub32], scales[kSub32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kSub32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] =
        kquant::MakeQkx2Quants(32, kNmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kSub32; ++j) {
    uint8_t ls = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
    kquant::PutScaleMinK4(j, std::min<uint8_t>(63, ls), std::min<uint8_t>(63, lm), y->scales);
  }
  y->d = Fp32ToFp16(max_scale / 63.f);
  y->dmin = Fp32ToFp16(max_min / 63.f);
  RequantizeQ45<kNmax>(x, y->d, y->dmin, y->scales, L);
  if constexpr (kNmax == 31) PackQ45(L, y->qs, y->qh); else PackQ45(L, y->qs, nullptr);
}

// With an imatrix: weights qw·√(σ² + x²), make_qkx3_quants, the 6-bit scales fitted by make_qp_quants.
template <int kNmax, typename Block>
void Q45BlockImatrix(const float* x, Block* y, const float* qw) {
  uint8_t L[kQkK], Laux[32], Ls[kSub32], Lm[kSub32];
  float weights[32], sw[kSub32], mins[kSub32], scales[kSub32];
  float sum_x2 = 0;
  for (int l = 0; l < kQkK; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = 2 * sum_x2 / kQkK;
  for (int j = 0; j < kSub32; ++j) {
    sw[j] = SubBlockWeights(x + 32 * j, qw + 32 * j, sigma2, 32, weights);
    scales[j] =
        kquant::MakeQkx3Quants(32, kNmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
  }
  const float d_block = kquant::MakeQpQuants(kSub32, 63, scales, Ls, sw);
  const float m_block = kquant::MakeQpQuants(kSub32, 63, mins, Lm, sw);
  for (int j = 0; j < kSub32; ++j) kquant::PutScaleMinK4(j, std::min<uint8_t>(63, Ls[j]), std::min<uint8_t>(63, Lm[j]), y->scales);
  y->d = Fp32ToFp16(d_block);
  y->dmin = Fp32ToFp16(m_block);
  RequantizeQ45<kNmax>(x, y->d, y->dmin, y->scales, L);
  if constexpr (kNmax == 31) PackQ45(L, y->qs, y->qh); else PackQ45(L, y->qs, nullptr);
}

// ---- Q6_K: the reference is the imatrix version with null weights (x²).

void Q6_KBlock(const float* x, BlockQ6_K* y, const float* qw) {
  int8_t L[kQkK];
  float scales[kSub16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < kSub16; ++ib) {
    scales[ib] = kquant::MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib, 1, qw ? qw + 16 * ib : nullptr);
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[ib];
    }
  }
  if (max_abs_scale < kquant::kGroupMaxEps) {
    std::memset(y, 0, sizeof(*y));
    y->d = Fp32ToFp16(0.f);
    return;
  }
  const float iscale = -128.f / max_scale;
  y->d = Fp32ToFp16(1 / iscale);
  for (int ib = 0; ib < kSub16; ++ib) y->scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
  for (int j = 0; j < kSub16; ++j) {
    const float d = Fp16ToFp32(y->d) * y->scales[j];
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = static_cast<int8_t>(std::clamp(NearestInt(x[16 * j + ii] / d), -32, 31) + 32);
  }
  uint8_t* ql = y->ql;
  uint8_t* qh = y->qh;
  for (int j = 0; j < kQkK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[l + 0] = q1 | (q3 << 4);
      ql[l + 32] = q2 | (q4 << 4);
      qh[l] = (L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6);
    }
    ql += 64;
    qh += 32;
  }
}

// quantize_<type>: the reference over all rows without weights, else the imatrix version per row.
template <typename Block, typename Ref, typename Impl>
int64_t QuantizeRows(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw, Ref ref, Impl impl) {
  const int64_t nb = n_per_row / kQkK;
  auto* y = static_cast<Block*>(dst);
  for (int64_t r = 0; r < nrow; ++r) {
    for (int64_t i = 0; i < nb; ++i) {
      const float* x = src + r * n_per_row + i * kQkK;
      if (qw) impl(x, y + r * nb + i, qw + i * kQkK); else ref(x, y + r * nb + i);
    }
  }
  return nrow * nb * static_cast<int64_t>(sizeof(Block));
}

}  // namespace

void QuantizeRowQ2_KRef(const float* x, BlockQ2_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) Q2_KBlockRef(x + i * kQkK, y + i);
}
void QuantizeRowQ3_KRef(const float* x, BlockQ3_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) Q3_KBlockRef(x + i * kQkK, y + i);
}
void QuantizeRowQ4_KRef(const float* x, BlockQ4_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) Q45BlockRef<15>(x + i * kQkK, y + i, -1.f, 20);
}
void QuantizeRowQ5_KRef(const float* x, BlockQ5_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) Q45BlockRef<31>(x + i * kQkK, y + i, -0.5f, 15);
}
void QuantizeRowQ6_KRef(const float* x, BlockQ6_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) Q6_KBlock(x + i * kQkK, y + i, nullptr);
}

int64_t QuantizeQ2_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  return QuantizeRows<BlockQ2_K>(src, dst, nrow, n_per_row, qw, Q2_KBlockRef, Q2_KBlockImatrix);
}
int64_t QuantizeQ3_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  return QuantizeRows<BlockQ3_K>(src, dst, nrow, n_per_row, qw, Q3_KBlockRef, Q3_KBlockImatrix);
}
int64_t QuantizeQ4_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  return QuantizeRows<BlockQ4_K>(
      src, dst, nrow, n_per_row, qw, [](const float* x, BlockQ4_K* y) { Q45BlockRef<15>(x, y, -1.f, 20); },
      Q45BlockImatrix<15, BlockQ4_K>);
}
int64_t QuantizeQ5_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  return QuantizeRows<BlockQ5_K>(
      src, dst, nrow, n_per_row, qw, [](const float* x, BlockQ5_K* y) { Q45BlockRef<31>(x, y, -0.5f, 15); },
      Q45BlockImatrix<31, BlockQ5_K>);
}
int64_t QuantizeQ6_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  return QuantizeRows<BlockQ6_K>(
      src, dst, nrow, n_per_row, qw, [](const float* x, BlockQ6_K* y) { Q6_KBlock(x, y, nullptr); }, Q6_KBlock);
}

}  // namespace quark::exporter::gguf
