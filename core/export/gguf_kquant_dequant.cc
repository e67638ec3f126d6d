#include "core/export/gguf_blocks.h"
#include "core/export/gguf_kquant_search.h"
#include "core/export/gguf_kquants.h"

// dequantize_row_q{2..6}_K of ggml-quants.c: the same products in the same order, so the floats are ggml's.

namespace quark::exporter::gguf {

void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) {
    const float d = Fp16ToFp32(x[i].d), min = Fp16ToFp32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < kQkK; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
      q += 32;
    }
  }
}

void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) {
    const float d_all = Fp16ToFp32(x[i].d);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int is = 0;
    auto scale = [&](int j) {
      const int low = j < 8 ? x[i].scales[j] & 0xF : x[i].scales[j - 8] >> 4;
      return static_cast<int8_t>(low | (((x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4));
    };
    for (int n = 0; n < kQkK; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * (scale(is++) - 32);
          for (int l = 0; l < 16; ++l) {
            const int e = l + 16 * half;
            *y++ = dl * (static_cast<int8_t>((q[e] >> shift) & 3) - ((hm[e] & m) ? 0 : 4));
          }
        }
        m <<= 1;
      }
      q += 32;
    }
  }
}

namespace {

// Q4_K (qh null) and Q5_K.
void DequantizeQ45(const uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* ql, const uint8_t* qh,
                   float* y) {
  const float d = Fp16ToFp32(d16), min = Fp16ToFp32(dmin16);
  uint8_t sc, m, u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < kQkK; j += 64, is += 2) {
    kquant::GetScaleMinK4(is + 0, scales, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    kquant::GetScaleMinK4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh && (qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    u1 <<= 2;
    u2 <<= 2;
  }
}

}  // namespace

void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) DequantizeQ45(x[i].d, x[i].dmin, x[i].scales, x[i].qs, nullptr, y + i * kQkK);
}

void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) DequantizeQ45(x[i].d, x[i].dmin, x[i].scales, x[i].qs, x[i].qh, y + i * kQkK);
}

void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQkK; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQkK; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int8_t q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int8_t q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int8_t q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int8_t q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

}  // namespace quark::exporter::gguf
