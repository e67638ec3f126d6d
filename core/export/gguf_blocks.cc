#include "core/export/gguf_blocks.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/base/strings.h"
#include "core/export/gguf_kquants.h"
#include "core/export/gguf_legacy_imatrix.h"
#include "core/export/gguf_mxfp4.h"

// Built with -ffp-contract=off (core/export/CMakeLists.txt): a fused multiply-add in `x * id + 8.5f` would round
// once instead of twice and change codes at the rounding boundary, where llama.cpp's kernels round twice.

namespace quark::exporter::gguf {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

void F32FromFloat(const float* x, void* y, int64_t n) { std::memcpy(y, x, sizeof(float) * n); }
void F32ToFloat(const void* x, float* y, int64_t n) { std::memcpy(y, x, sizeof(float) * n); }

void F16FromFloat(const float* x, void* y, int64_t n) {
  auto* out = static_cast<uint16_t*>(y);
  for (int64_t i = 0; i < n; ++i) out[i] = Fp32ToFp16(x[i]);
}
void F16ToFloat(const void* x, float* y, int64_t n) {
  const auto* in = static_cast<const uint16_t*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] = Fp16ToFp32(in[i]);
}
void Bf16FromFloat(const float* x, void* y, int64_t n) {
  auto* out = static_cast<uint16_t*>(y);
  for (int64_t i = 0; i < n; ++i) out[i] = Fp32ToBf16(x[i]);
}
void Bf16ToFloat(const void* x, float* y, int64_t n) {
  const auto* in = static_cast<const uint16_t*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16ToFp32(in[i]);
}

void Q8_0FromFloat(const float* x, void* y, int64_t n) { QuantizeRowQ8_0Ref(x, static_cast<BlockQ8_0*>(y), n); }
void Mxfp4FromFloat(const float* x, void* y, int64_t n) { QuantizeRowMxfp4Ref(x, static_cast<BlockMxfp4*>(y), n); }
void Mxfp4ToFloat(const void* x, float* y, int64_t n) { DequantizeRowMxfp4(static_cast<const BlockMxfp4*>(x), y, n); }

void Q8_0ToFloat(const void* x, float* y, int64_t n) { DequantizeRowQ8_0Ref(static_cast<const BlockQ8_0*>(x), y, n); }
void Q4_0FromFloat(const float* x, void* y, int64_t n) { QuantizeRowQ4_0Ref(x, static_cast<BlockQ4_0*>(y), n); }
void Q4_0ToFloat(const void* x, float* y, int64_t n) { DequantizeRowQ4_0Ref(static_cast<const BlockQ4_0*>(x), y, n); }
void Q4_1FromFloat(const float* x, void* y, int64_t n) { QuantizeRowQ4_1Ref(x, static_cast<BlockQ4_1*>(y), n); }
void Q4_1ToFloat(const void* x, float* y, int64_t n) { DequantizeRowQ4_1Ref(static_cast<const BlockQ4_1*>(x), y, n); }
void Q5_0FromFloat(const float* x, void* y, int64_t n) { QuantizeRowQ5_0Ref(x, static_cast<BlockQ5_0*>(y), n); }
void Q5_0ToFloat(const void* x, float* y, int64_t n) { DequantizeRowQ5_0Ref(static_cast<const BlockQ5_0*>(x), y, n); }
void Q5_1FromFloat(const float* x, void* y, int64_t n) { QuantizeRowQ5_1Ref(x, static_cast<BlockQ5_1*>(y), n); }
void Q5_1ToFloat(const void* x, float* y, int64_t n) { DequantizeRowQ5_1Ref(static_cast<const BlockQ5_1*>(x), y, n); }

// The block's least and greatest values (Q4_1, Q5_1).
void MinMax(const float* xb, float* min, float* max) {
  *min = 3.402823466e+38f;
  *max = -3.402823466e+38f;
  for (int j = 0; j < kBlockSize; ++j) {
    if (xb[j] < *min) *min = xb[j];
    if (xb[j] > *max) *max = xb[j];
  }
}

// Q5_0 / Q5_1: the low nibbles as Q4_0's, the fifth bits of the 32 codes in one little-endian word.
template <typename Block>
void PackQ5(const uint8_t* q, Block* y) {
  uint32_t qh = 0;
  for (int j = 0; j < kBlockSize / 2; ++j) {
    y->qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + kBlockSize / 2] & 0x0F) << 4));
    qh |= ((q[j] & 0x10u) >> 4) << j;
    qh |= ((q[j + kBlockSize / 2] & 0x10u) >> 4) << (j + kBlockSize / 2);
  }
  std::memcpy(y->qh, &qh, sizeof(qh));
}

template <typename Block>
int Q5Code(const Block& x, int j) {
  uint32_t qh;
  std::memcpy(&qh, x.qh, sizeof(qh));
  const int low = j < kBlockSize / 2 ? x.qs[j] & 0x0F : x.qs[j - kBlockSize / 2] >> 4;
  return low | static_cast<int>(((qh >> j) & 1u) << 4);
}

// The K-quant and IQ4 rows: from_float is what ggml_quantize_chunk does without an imatrix (IQ4_NL searches its
// scales there, unlike quantize_row_iq4_nl_ref).
#define QUARK_GGUF_KQUANT_ROW_FUNCS(Name, Block)                                                      \
  void Name##FromFloat(const float* x, void* y, int64_t n) { Quantize##Name(x, y, 1, n, nullptr); } \
  void Name##ToFloat(const void* x, float* y, int64_t n) {                                          \
    DequantizeRow##Name(static_cast<const Block*>(x), y, n);                                        \
  }
QUARK_GGUF_KQUANT_ROW_FUNCS(Q2_K, BlockQ2_K)
QUARK_GGUF_KQUANT_ROW_FUNCS(Q3_K, BlockQ3_K)
QUARK_GGUF_KQUANT_ROW_FUNCS(Q4_K, BlockQ4_K)
QUARK_GGUF_KQUANT_ROW_FUNCS(Q5_K, BlockQ5_K)
QUARK_GGUF_KQUANT_ROW_FUNCS(Q6_K, BlockQ6_K)
QUARK_GGUF_KQUANT_ROW_FUNCS(Iq4Nl, BlockIq4Nl)
QUARK_GGUF_KQUANT_ROW_FUNCS(Iq4Xs, BlockIq4Xs)
#undef QUARK_GGUF_KQUANT_ROW_FUNCS

// llama_ftype values: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q4_1 3, MOSTLY_Q8_0 7, Q5_0 8, Q5_1 9, Q2_K 10, Q3_K_M 12,
// Q4_K_M 15, Q5_K_M 17, Q6_K 18, IQ4_NL 25, IQ4_XS 30, MOSTLY_BF16 32 (a mixture names its own, gguf_mixture.h).
constexpr TypeTraits kTypes[] = {
    {GgmlType::kF32, "F32", 1, 4, false, 0, F32FromFloat, F32ToFloat, nullptr},
    {GgmlType::kF16, "F16", 1, 2, false, 1, F16FromFloat, F16ToFloat, nullptr},
    {GgmlType::kQ4_0, "Q4_0", kBlockSize, sizeof(BlockQ4_0), true, 2, Q4_0FromFloat, Q4_0ToFloat, QuantizeQ4_0},
    {GgmlType::kQ4_1, "Q4_1", kBlockSize, sizeof(BlockQ4_1), true, 3, Q4_1FromFloat, Q4_1ToFloat, QuantizeQ4_1},
    {GgmlType::kQ5_0, "Q5_0", kBlockSize, sizeof(BlockQ5_0), true, 8, Q5_0FromFloat, Q5_0ToFloat, QuantizeQ5_0},
    {GgmlType::kQ5_1, "Q5_1", kBlockSize, sizeof(BlockQ5_1), true, 9, Q5_1FromFloat, Q5_1ToFloat, QuantizeQ5_1},
    {GgmlType::kQ8_0, "Q8_0", kBlockSize, sizeof(BlockQ8_0), true, 7, Q8_0FromFloat, Q8_0ToFloat, nullptr},
    {GgmlType::kQ2_K, "Q2_K", kQkK, sizeof(BlockQ2_K), true, 10, Q2_KFromFloat, Q2_KToFloat, QuantizeQ2_K},
    {GgmlType::kQ3_K, "Q3_K", kQkK, sizeof(BlockQ3_K), true, 12, Q3_KFromFloat, Q3_KToFloat, QuantizeQ3_K},
    {GgmlType::kQ4_K, "Q4_K", kQkK, sizeof(BlockQ4_K), true, 15, Q4_KFromFloat, Q4_KToFloat, QuantizeQ4_K},
    {GgmlType::kQ5_K, "Q5_K", kQkK, sizeof(BlockQ5_K), true, 17, Q5_KFromFloat, Q5_KToFloat, QuantizeQ5_K},
    {GgmlType::kQ6_K, "Q6_K", kQkK, sizeof(BlockQ6_K), true, 18, Q6_KFromFloat, Q6_KToFloat, QuantizeQ6_K},
    {GgmlType::kIQ4_NL, "IQ4_NL", kQk4Nl, sizeof(BlockIq4Nl), true, 25, Iq4NlFromFloat, Iq4NlToFloat, QuantizeIq4Nl},
    {GgmlType::kIQ4_XS, "IQ4_XS", kQkK, sizeof(BlockIq4Xs), true, 30, Iq4XsFromFloat, Iq4XsToFloat, QuantizeIq4Xs},
    {GgmlType::kBF16, "BF16", 1, 2, false, 32, Bf16FromFloat, Bf16ToFloat, nullptr},
    {kGgmlMxfp4, "MXFP4", kBlockSize, sizeof(BlockMxfp4), true, kFileTypeMxfp4Moe, Mxfp4FromFloat, Mxfp4ToFloat, nullptr},
};

}  // namespace

const TypeTraits* AllTypes(int* count) {
  *count = static_cast<int>(std::size(kTypes));
  return kTypes;
}

const TypeTraits* FindType(GgmlType type) {
  for (const TypeTraits& t : kTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

absl::StatusOr<GgmlType> ParseGgmlType(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<std::string> names;
  for (const TypeTraits& t : kTypes) {
    if (upper == t.name) return t.type;
    names.push_back(t.name);
  }
  return absl::InvalidArgumentError(
      StrCat("gguf_type: \"", name, "\" is not one of ", StrJoin(names, ", ")));
}

int64_t RowBytes(GgmlType type, int64_t n) {
  const TypeTraits* t = FindType(type);
  return n / t->block_size * t->type_size;
}

uint16_t Fp32ToFp16(float f) {
  const uint32_t x = Bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN: quiet, as ggml
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal half is |f| * 2^24 rounded to an integer (exact
    // scaling, then round half to even); 1024 is the smallest normal's encoding, which is also correct.
    return sign | static_cast<uint16_t>(std::nearbyint(FromBits(abs) * 16777216.0f));
  }
  uint32_t h = (abs >> 13) - (112u << 10);  // rebias the exponent 127 -> 15
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still correct
  return sign | static_cast<uint16_t>(h);
}

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // exact
    return FromBits(Bits(v) | sign);
  }
  // Infinity, or NaN with its payload, quiet (as ggml's arithmetic conversion leaves it).
  if (exp == 31) return FromBits(sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u));
  return FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t Fp32ToBf16(float f) {
  const uint32_t x = Bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64u);  // NaN, forced quiet
  return static_cast<uint16_t>((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

float Bf16ToFp32(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }

void QuantizeRowQ8_0Ref(const float* x, BlockQ8_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float* xb = x + i * kBlockSize;
    float amax = 0.0f;
    for (int j = 0; j < kBlockSize; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kBlockSize; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(xb[j] * id));
  }
}

void QuantizeRowQ4_0Ref(const float* x, BlockQ4_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float* xb = x + i * kBlockSize;
    float amax = 0.0f, max = 0.0f;  // the first value of the largest magnitude, with its sign
    for (int j = 0; j < kBlockSize; ++j) {
      if (amax < std::fabs(xb[j])) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kBlockSize / 2; ++j) {
      const float x0 = xb[j] * id;
      const float x1 = xb[j + kBlockSize / 2] * id;
      // Truncation toward zero after +8.5, as llama.cpp's (int8_t) cast; 16 (a value opposite to max) clips to 15.
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x0 + 8.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x1 + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ4_1Ref(const float* x, BlockQ4_1* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float* xb = x + i * kBlockSize;
    float min, max;
    MinMax(xb, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    for (int j = 0; j < kBlockSize / 2; ++j) {
      const float x0 = (xb[j] - min) * id;
      const float x1 = (xb[j + kBlockSize / 2] - min) * id;
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x0 + 0.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x1 + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ5_0Ref(const float* x, BlockQ5_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float* xb = x + i * kBlockSize;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kBlockSize; ++j) {
      if (amax < std::fabs(xb[j])) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    uint8_t q[kBlockSize];
    for (int j = 0; j < kBlockSize; ++j) q[j] = static_cast<uint8_t>(std::min<int>(31, static_cast<int8_t>(xb[j] * id + 16.5f)));
    PackQ5(q, &y[i]);
  }
}

void QuantizeRowQ5_1Ref(const float* x, BlockQ5_1* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float* xb = x + i * kBlockSize;
    float min, max;
    MinMax(xb, &min, &max);
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    uint8_t q[kBlockSize];
    for (int j = 0; j < kBlockSize; ++j) q[j] = static_cast<uint8_t>((xb[j] - min) * id + 0.5f);
    PackQ5(q, &y[i]);
  }
}

void DequantizeRowQ5_0Ref(const BlockQ5_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kBlockSize; ++j) y[i * kBlockSize + j] = (Q5Code(x[i], j) - 16) * d;
  }
}

void DequantizeRowQ5_1Ref(const BlockQ5_1* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float d = Fp16ToFp32(x[i].d), m = Fp16ToFp32(x[i].m);
    for (int j = 0; j < kBlockSize; ++j) y[i * kBlockSize + j] = Q5Code(x[i], j) * d + m;
  }
}

void DequantizeRowQ8_0Ref(const BlockQ8_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kBlockSize; ++j) y[i * kBlockSize + j] = x[i].qs[j] * d;
  }
}

void DequantizeRowQ4_0Ref(const BlockQ4_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kBlockSize / 2; ++j) {
      y[i * kBlockSize + j] = ((x[i].qs[j] & 0x0f) - 8) * d;
      y[i * kBlockSize + j + kBlockSize / 2] = ((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeRowQ4_1Ref(const BlockQ4_1* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockSize; ++i) {
    const float d = Fp16ToFp32(x[i].d), m = Fp16ToFp32(x[i].m);
    for (int j = 0; j < kBlockSize / 2; ++j) {
      y[i * kBlockSize + j] = (x[i].qs[j] & 0x0f) * d + m;
      y[i * kBlockSize + j + kBlockSize / 2] = (x[i].qs[j] >> 4) * d + m;
    }
  }
}

}  // namespace quark::exporter::gguf
