// The ggml tensor types a GGUF export holds (F32, F16, BF16, Q8_0, Q4_0, Q4_1, and the K-quants and IQ4 types of
// gguf_kquants.h): one packed struct per block format, one row per type in the traits table, and a scalar reference
// kernel per direction. The quantizers reproduce
// llama.cpp's reference kernels (ggml-quants.c, quantize_row_*_ref), which llama-quantize uses when no importance
// matrix is given, bit for bit; tests/export/gguf_blocks_test.cc checks them against the real libggml-base.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace quark::exporter::gguf {

/// ggml_type values as stored in a GGUF tensor table.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
};

/// Weights per block of the legacy quantized types (QK4_0 = QK4_1 = QK8_0 = QK4_NL); the K-quants have 256.
inline constexpr int64_t kBlockSize = 32;

/// 32 weights: w = d * (q - 8), q in [0, 15]; byte j holds q[j] (low nibble) and q[j + 16] (high nibble).
struct BlockQ4_0 {
  uint16_t d;  // fp16
  uint8_t qs[kBlockSize / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "block_q4_0 is 18 bytes");

/// 32 weights: w = d * q + m, q in [0, 15]; nibbles as Q4_0.
struct BlockQ4_1 {
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qs[kBlockSize / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "block_q4_1 is 20 bytes");

/// 32 weights: w = d * (q - 16), q in [0, 31]: low 4 bits as Q4_0's nibbles, bit 4 of q[j] in bit j of qh.
struct BlockQ5_0 {
  uint16_t d;  // fp16
  uint8_t qh[4];
  uint8_t qs[kBlockSize / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "block_q5_0 is 22 bytes");

/// 32 weights: w = d * q + m, q in [0, 31]; bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qh[4];
  uint8_t qs[kBlockSize / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "block_q5_1 is 24 bytes");

/// 32 weights: w = d * q, q in [-127, 127] (the engine's int8 codes may also be -128).
struct BlockQ8_0 {
  uint16_t d;  // fp16
  int8_t qs[kBlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34, "block_q8_0 is 34 bytes");

/// One row of the traits table. `from_float` / `to_float` convert `n` values (n a multiple of block_size).
struct TypeTraits {
  GgmlType type;
  const char* name;     // llama.cpp's spelling: "F32", "Q4_1", ...
  int64_t block_size;   // values per block (1 for float types)
  int64_t type_size;    // bytes per block
  bool quantized;
  uint32_t file_type;   // llama_ftype of a file whose weights are mostly this type (general.file_type)
  void (*from_float)(const float* x, void* y, int64_t n);
  void (*to_float)(const void* x, float* y, int64_t n);
  /// quantize_<type> with importance weights `qw` (n_per_row, one per column) for `nrow` rows; null where ggml's
  /// quantizer ignores them (the float types, Q8_0), so callers quantize those with from_float.
  int64_t (*quantize)(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
};

/// The whole table, in ggml_type order.
const TypeTraits* AllTypes(int* count);
/// nullptr for a type outside the table.
const TypeTraits* FindType(GgmlType type);
/// By name, case-insensitive ("q4_1", "F16"); INVALID_ARGUMENT listing the names for an unknown one.
absl::StatusOr<GgmlType> ParseGgmlType(std::string_view name);
/// Bytes of a row of `n` values; n must be a multiple of the type's block size (checked by callers).
int64_t RowBytes(GgmlType type, int64_t n);

/// IEEE half / bfloat16 conversions as ggml computes them (round to nearest even; NaN stays NaN, quiet).
uint16_t Fp32ToFp16(float f);
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToBf16(float f);
float Bf16ToFp32(uint16_t h);

/// llama.cpp's reference quantizers (k a multiple of 32).
void QuantizeRowQ8_0Ref(const float* x, BlockQ8_0* y, int64_t k);
void QuantizeRowQ4_0Ref(const float* x, BlockQ4_0* y, int64_t k);
void QuantizeRowQ4_1Ref(const float* x, BlockQ4_1* y, int64_t k);
void QuantizeRowQ5_0Ref(const float* x, BlockQ5_0* y, int64_t k);
void QuantizeRowQ5_1Ref(const float* x, BlockQ5_1* y, int64_t k);
void DequantizeRowQ8_0Ref(const BlockQ8_0* x, float* y, int64_t k);
void DequantizeRowQ4_0Ref(const BlockQ4_0* x, float* y, int64_t k);
void DequantizeRowQ4_1Ref(const BlockQ4_1* x, float* y, int64_t k);
void DequantizeRowQ5_0Ref(const BlockQ5_0* x, float* y, int64_t k);
void DequantizeRowQ5_1Ref(const BlockQ5_1* x, float* y, int64_t k);

}  // namespace quark::exporter::gguf
