// GGUF K-quants and the 4-bit non-linear types (ggml-common.h, ggml-quants.c): one packed struct per block with its
// size asserted, and the scalar quantizers llama-quantize runs, byte for byte: `QuantizeRow*Ref` without an importance
// matrix (quantize_row_*_ref) and `Quantize*` with one (quantize_<type>, per row, quant weights of n_per_row values;
// a null `qw` falls back to the reference, as ggml does). tests/export/gguf_kquants_test.cc checks every block
// against the real libggml-base. Super-blocks hold kQkK = 256 weights (IQ4_NL: 32).
#pragma once

#include <cstdint>

namespace quark::exporter::gguf {

inline constexpr int64_t kQkK = 256;
inline constexpr int kKScaleSize = 12;
inline constexpr int64_t kQk4Nl = 32;

/// 16 sub-blocks of 16: w = d·(scales[b] & 15)·q − dmin·(scales[b] >> 4), q in [0, 3].
struct BlockQ2_K {
  uint8_t scales[kQkK / 16];
  uint8_t qs[kQkK / 4];
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
};
static_assert(sizeof(BlockQ2_K) == 84, "block_q2_K is 84 bytes");

/// 16 sub-blocks of 16: w = d·(sc − 32)·q, q in [−4, 3] (hmask bit set = no −4), 6-bit scales packed in 12 bytes.
struct BlockQ3_K {
  uint8_t hmask[kQkK / 8];
  uint8_t qs[kQkK / 4];
  uint8_t scales[kKScaleSize];
  uint16_t d;  // fp16
};
static_assert(sizeof(BlockQ3_K) == 110, "block_q3_K is 110 bytes");

/// 8 sub-blocks of 32: w = d·sc·q − dmin·m, q in [0, 15], 6-bit sc and m packed in 12 bytes.
struct BlockQ4_K {
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQkK / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "block_q4_K is 144 bytes");

/// Q4_K with a fifth bit per weight in qh: q in [0, 31].
struct BlockQ5_K {
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQkK / 8];
  uint8_t qs[kQkK / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "block_q5_K is 176 bytes");

/// 16 sub-blocks of 16: w = d·scales[b]·(q − 32), q in [0, 63] (low 4 bits in ql, high 2 in qh).
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];
  uint8_t qh[kQkK / 4];
  int8_t scales[kQkK / 16];
  uint16_t d;  // fp16
};
static_assert(sizeof(BlockQ6_K) == 210, "block_q6_K is 210 bytes");

/// 32 weights: w = d·kIq4NlValues[q]; byte j holds q[j] (low nibble) and q[j + 16] (high).
struct BlockIq4Nl {
  uint16_t d;  // fp16
  uint8_t qs[kQk4Nl / 2];
};
static_assert(sizeof(BlockIq4Nl) == 18, "block_iq4_nl is 18 bytes");

/// 8 sub-blocks of 32 with 6-bit scales (offset 32; low 4 bits in scales_l, high 2 in scales_h); nibbles as IQ4_NL.
struct BlockIq4Xs {
  uint16_t d;  // fp16
  uint16_t scales_h;
  uint8_t scales_l[kQkK / 64];
  uint8_t qs[kQkK / 2];
};
static_assert(sizeof(BlockIq4Xs) == 136, "block_iq4_xs is 136 bytes");

/// The 16 levels of IQ4_NL / IQ4_XS.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

/// Reference quantizers without an importance matrix (k a multiple of the block size).
void QuantizeRowQ2_KRef(const float* x, BlockQ2_K* y, int64_t k);
void QuantizeRowQ3_KRef(const float* x, BlockQ3_K* y, int64_t k);
void QuantizeRowQ4_KRef(const float* x, BlockQ4_K* y, int64_t k);
void QuantizeRowQ5_KRef(const float* x, BlockQ5_K* y, int64_t k);
void QuantizeRowQ6_KRef(const float* x, BlockQ6_K* y, int64_t k);
/// quantize_row_iq4_nl_ref: no scale search. A block below 1e-15 in magnitude keeps the codes of the block before it
/// (ggml reuses its code buffer; the first block's are zeros here, undefined in ggml); its d is 0 either way.
void QuantizeRowIq4NlRef(const float* x, BlockIq4Nl* y, int64_t k);
void QuantizeRowIq4XsRef(const float* x, BlockIq4Xs* y, int64_t k);

/// quantize_<type>: `nrow` rows of `n_per_row` values into `dst` (rows of RowBytes); `qw` (n_per_row importance
/// weights, one per column, or null) as llama-quantize passes the imatrix. Returns the bytes written. Q2_K with
/// an imatrix, Q3_K..Q6_K with one; IQ4_NL and IQ4_XS search scales with or without one (what llama-quantize runs).
int64_t QuantizeQ2_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
int64_t QuantizeQ3_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
int64_t QuantizeQ4_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
int64_t QuantizeQ5_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
int64_t QuantizeQ6_K(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
int64_t QuantizeIq4Nl(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
int64_t QuantizeIq4Xs(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);

/// Dequantizers (dequantize_row_*).
void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t k);
void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t k);
void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t k);
void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t k);
void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t k);
void DequantizeRowIq4Nl(const BlockIq4Nl* x, float* y, int64_t k);
void DequantizeRowIq4Xs(const BlockIq4Xs* x, float* y, int64_t k);

}  // namespace quark::exporter::gguf
