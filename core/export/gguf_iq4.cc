#include <cmath>
#include <cstring>

#include "core/export/gguf_blocks.h"
#include "core/export/gguf_kquant_search.h"
#include "core/export/gguf_kquants.h"

// IQ4_NL and IQ4_XS, ported from ggml-quants.c's quantize_row_iq4_nl_impl (ggml-org/llama.cpp, MIT): a scale per
// 32 weights searched over the 16 non-linear levels (ntry steps each side; ntry <= 0: no search), IQ4_XS storing
// those scales as 6-bit codes under one fp16 super-block scale. Built with -ffp-contract=off.

namespace quark::exporter::gguf {
namespace {

using kquant::BestIndexInt8;
using kquant::NearestInt;

// One super-block of `super` weights (32 for IQ4_NL, 256 for IQ4_XS). `L` (super codes) persists across calls, as
// ggml's buffer does: an all-zero IQ4_NL block without search keeps the previous block's codes.
void Iq4Block(int super, const float* x, uint16_t* dh, uint8_t* q4, uint16_t* scales_h, uint8_t* scales_l,
              uint8_t* L, const float* quant_weights, int ntry) {
  constexpr int kBlock = 32;
  const int8_t* values = kIq4NlValues;
  float scales[kQkK / kBlock], weight[kBlock];
  float sigma2 = 0;
  for (int j = 0; j < super; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.f / super;
  std::memset(q4, 0, super / 2);
  dh[0] = Fp32ToFp16(0.f);
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < super / kBlock; ++ib) {
    const float* xb = x + ib * kBlock;
    uint8_t* Lb = L + ib * kBlock;
    if (quant_weights) {
      const float* qw = quant_weights + ib * kBlock;
      for (int j = 0; j < kBlock; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
    } else {
      for (int j = 0; j < kBlock; ++j) weight[j] = xb[j] * xb[j];
    }
    float amax = 0, max = 0;
    for (int j = 0; j < kBlock; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax < kquant::kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    float d = ntry > 0 ? -max / values[0] : max / values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kBlock; ++j) {
      const int l = BestIndexInt8(16, values, id * xb[j]);
      Lb[j] = static_cast<uint8_t>(l);
      const float q = values[l];
      const float w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
      id = (itry + values[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < kBlock; ++j) {
        const float q = values[BestIndexInt8(16, values, id * xb[j])];
        const float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    const float abs_d = std::fabs(d);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = d;
    }
  }
  if (super / kBlock > 1) {
    const int nb = super / kBlock;
    std::memset(scales_h, 0, ((nb + 7) / 8) * sizeof(uint16_t));
    const float d = -max_scale / 32;
    dh[0] = Fp32ToFp16(d);
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < nb; ++ib) {
      int l = NearestInt(id * scales[ib]);
      l = std::max(-32, std::min(31, l));
      const float dl = d * l;
      const float idl = dl ? 1 / dl : 0.f;
      uint8_t* Lb = L + ib * kBlock;
      const float* xb = x + ib * kBlock;
      for (int j = 0; j < kBlock; ++j) Lb[j] = static_cast<uint8_t>(BestIndexInt8(16, values, idl * xb[j]));
      l += 32;
      const uint8_t l_l = l & 0xf, l_h = static_cast<uint8_t>(l >> 4);
      if (ib % 2 == 0) scales_l[ib / 2] = l_l; else scales_l[ib / 2] |= (l_l << 4);
      scales_h[ib / 8] |= (l_h << 2 * (ib % 8));
    }
  } else {
    dh[0] = Fp32ToFp16(scales[0]);
    if (ntry > 0) {
      const float id = scales[0] ? 1 / scales[0] : 0;
      for (int j = 0; j < super; ++j) L[j] = static_cast<uint8_t>(BestIndexInt8(16, values, id * x[j]));
    }
  }
  for (int i = 0; i < super / 32; ++i) {
    for (int j = 0; j < 16; ++j) q4[16 * i + j] = L[32 * i + j] | (L[32 * i + 16 + j] << 4);
  }
}

void Iq4NlRow(const float* x, BlockIq4Nl* y, int64_t n, const float* qw, int ntry) {
  uint8_t L[kQk4Nl] = {};
  uint16_t unused_h;
  for (int64_t ib = 0; ib < n / kQk4Nl; ++ib) {
    Iq4Block(kQk4Nl, x + kQk4Nl * ib, &y[ib].d, y[ib].qs, &unused_h, nullptr, L, qw ? qw + kQk4Nl * ib : nullptr, ntry);
  }
}

}  // namespace

void QuantizeRowIq4NlRef(const float* x, BlockIq4Nl* y, int64_t k) { Iq4NlRow(x, y, k, nullptr, -1); }

void QuantizeRowIq4XsRef(const float* x, BlockIq4Xs* y, int64_t k) { QuantizeIq4Xs(x, y, 1, k, nullptr); }

int64_t QuantizeIq4Nl(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  const int64_t nb = n_per_row / kQk4Nl;
  auto* y = static_cast<BlockIq4Nl*>(dst);
  for (int64_t r = 0; r < nrow; ++r) Iq4NlRow(src + r * n_per_row, y + r * nb, n_per_row, qw, 7);
  return nrow * nb * static_cast<int64_t>(sizeof(BlockIq4Nl));
}

int64_t QuantizeIq4Xs(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  const int64_t nb = n_per_row / kQkK;
  auto* y = static_cast<BlockIq4Xs*>(dst);
  uint8_t L[kQkK];
  for (int64_t r = 0; r < nrow; ++r) {
    for (int64_t ib = 0; ib < nb; ++ib) {
      BlockIq4Xs& b = y[r * nb + ib];
      Iq4Block(kQkK, src + r * n_per_row + kQkK * ib, &b.d, b.qs, &b.scales_h, b.scales_l, L,
               qw ? qw + kQkK * ib : nullptr, 7);
    }
  }
  return nrow * nb * static_cast<int64_t>(sizeof(BlockIq4Xs));
}

void DequantizeRowIq4Nl(const BlockIq4Nl* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQk4Nl; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kQk4Nl / 2; ++j) {
      y[i * kQk4Nl + j] = d * kIq4NlValues[x[i].qs[j] & 0xf];
      y[i * kQk4Nl + j + kQk4Nl / 2] = d * kIq4NlValues[x[i].qs[j] >> 4];
    }
  }
}

void DequantizeRowIq4Xs(const BlockIq4Xs* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    const uint8_t* qs = x[i].qs;
    for (int ib = 0; ib < kQkK / 32; ++ib) {
      const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * (ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j + 0] = dl * kIq4NlValues[qs[j] & 0xf];
        y[j + 16] = dl * kIq4NlValues[qs[j] >> 4];
      }
      y += 32;
      qs += 16;
    }
  }
}

}  // namespace quark::exporter::gguf
