// The per-element math of every quantization kernel, written once: the CPU lane loops (kernels/cpu/lane_ops.h), the
// CPU scalar paths (rounding.h, float_grid.h, mx_kernels) and the CUDA kernels (kernels/cuda) all call these, so the
// CPU suite tests the arithmetic the GPU runs. g++ compiles them as plain inline C++, nvcc as __host__ __device__.
// Everything is float32 arithmetic on IEEE bit patterns, with no libm call and no contraction: CPU targets build
// with -ffp-contract=off and CUDA with --fmad=false, so a multiply followed by an add rounds twice on both.
//
// Like lane_ops.h this header is compiled into one namespace per instruction set (QUARK_LANE_NS, so no function
// compiled for AVX2 can be merged into baseline code by the linker); everywhere else it is quark::kernels::element.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/element/grid_args.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define QUARK_HD __host__ __device__ __forceinline__
#else
#define QUARK_HD inline
#endif

#if defined(QUARK_LANE_NS)
namespace quark::kernels::QUARK_LANE_NS {
#else
namespace quark::kernels::element {
#endif

QUARK_HD uint32_t Bits(float f) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
#endif
}

QUARK_HD float Float(uint32_t b) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, 4);
  return f;
#endif
}

/// Round half to even of |v| <= 2^22: adding 1.5 * 2^23 pushes the fraction out of the mantissa.
QUARK_HD float Rne(float v) { return (v + 12582912.0f) - 12582912.0f; }

/// Clamp that keeps NaN (both compares are false for NaN).
QUARK_HD float Clamp(float v, float lo, float hi) {
  const float a = v < lo ? lo : v;
  return a > hi ? hi : a;
}

/// The three round_methods of a QuantSpec, in RoundMode order: 0 half even, 1 half away from zero, 2 floor.
/// Selects only (no branches), so the CPU loops vectorize (with -fno-trapping-math). |v| <= 2^22.
template <int kMode>
QUARK_HD float Round(float v) {
  const float r = Rne(v);
  if (kMode == 0) return r;
  if (kMode == 2) return r - static_cast<float>(r > v);
  // Half away from zero: only exact ties differ from half-even; they move one step away from zero.
  const float d = v - r;
  const float away = v > 0.0f ? v + 0.5f : v - 0.5f;
  return (d == 0.5f || d == -0.5f) ? away : r;
}

/// Round<kMode> with the sign of zero of torch.round / floor: a negative v that rounds to zero gives -0 (the add/sub
/// trick of Rne gives +0). Only zero results change: any other result already has v's sign.
template <int kMode>
QUARK_HD float RoundKeepSign(float v) {
  return Float(Bits(Round<kMode>(v)) | (Bits(v) & 0x80000000u));
}

/// The clamped integer (as float32) of one fake-quantized element. Pre-clamping to one past the range keeps the
/// rounding trick valid without changing the result; NaN stays NaN.
template <int kMode, bool kFloatZp>
QUARK_HD float AffineCode(float x, float inv, float z, float qmin, float qmax) {
  if (kFloatZp) return Clamp(Round<kMode>(Clamp(x * inv + z, qmin - 1.0f, qmax + 1.0f)), qmin, qmax);
  return Clamp(Round<kMode>(Clamp(x * inv, qmin - z - 1.0f, qmax - z + 1.0f)) + z, qmin, qmax);
}

/// One fake-quantized element: (code - z) * s.
template <int kMode, bool kFloatZp>
QUARK_HD float AffineFake(float x, float s, float inv, float z, float qmin, float qmax) {
  return (AffineCode<kMode, kFloatZp>(x, inv, z, qmin, qmax) - z) * s;
}

/// The stored code of real quantization: clamp(round(x * inv + z), qmin, qmax), NaN gives qmin.
template <int kMode>
QUARK_HD float AffineRealCode(float x, float inv, float z, float qmin, float qmax) {
  float v = x * inv + z;
  v = v > qmin - 1.0f ? v : qmin - 1.0f;  // also maps NaN to qmin
  v = v < qmax + 1.0f ? v : qmax + 1.0f;
  return Clamp(Round<kMode>(v), qmin, qmax);
}

/// float32 -> bfloat16 bits, round to nearest even; any NaN becomes the quiet NaN 0x7FC0 (as c10::BFloat16 does).
QUARK_HD uint16_t Bf16Bits(float v) {
  const uint32_t b = Bits(v);
  const uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(v != v ? 0x7FC0u : rounded);  // one unordered compare (the build allows no traps)
}

QUARK_HD float Bf16ToFloat(uint16_t b) { return Float(static_cast<uint32_t>(b) << 16); }

/// float32 -> IEEE half bits, round to nearest even, NaN -> 0x7E00 with its sign: c10's fp16_ieee_from_fp32_value
/// (what a CPU `.to(kHalf)` does; CUDA's __float2half writes other NaN bits, so the GPU kernels use this too).
QUARK_HD uint16_t HalfBits(float f) {
  const float scale_to_inf = Float(239u << 23);  // 2^112
  const float scale_to_zero = Float(17u << 23);  // 2^-110
  float base = (Float(Bits(f) & 0x7FFFFFFFu) * scale_to_inf) * scale_to_zero;
  const uint32_t w = Bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = Float((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = Bits(base);
  const uint32_t nonsign = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

/// IEEE half bits -> float32, exact (NaN payloads kept): c10's fp16_ieee_to_fp32_value.
QUARK_HD float HalfToFloat(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = Float((two_w >> 4) + (0xE0u << 23)) * Float(15u << 23);  // * 2^-112
  const float denormalized = Float((two_w >> 17) | (126u << 23)) - 0.5f;
  return Float(sign | (two_w < (1u << 27) ? Bits(denormalized) : Bits(normalized)));
}

/// Nearest value of the grid (ties to even), saturating: |x| > max and +-Inf give +-max, NaN stays NaN.
QUARK_HD float GridSat(float x, const GridArgs& g) {
  const uint32_t b = Bits(x);
  const uint32_t sign = b & 0x80000000u;
  const float a = Float(b & 0x7FFFFFFFu);
  const float c = a > g.max ? g.max : a;
  int32_t e = static_cast<int32_t>(Bits(c) >> 23) - 127;
  e = e < g.emin ? g.emin : e;
  // Adding 2^(e - mbits + 23) leaves exactly the format's mantissa bits; the FPU rounds half to even.
  // (A NaN makes a meaningless `m`, but NaN + m stays NaN.)
  const float m = Float(static_cast<uint32_t>(e - g.mbits + 23 + 127) << 23);
  return Float(Bits((c + m) - m) | sign);
}

/// A float format with a scale: round_fmt(clamp(x / s, -max, max)), still divided by s.
QUARK_HD float ScaledGridValue(float x, float s, const GridArgs& g) { return GridSat(Clamp(x / s, -g.max, g.max), g); }

/// Code of a value already on the grid (finite, |r| <= max) or NaN.
QUARK_HD uint8_t EncodeGridValue(float r, const GridCodeArgs& g) {
  const uint32_t b = Bits(r);
  const uint32_t sign = b >> 31;
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return g.has_nan ? static_cast<uint8_t>(g.nan_code | (sign << 7)) : 0;
  const int32_t e = static_cast<int32_t>(a >> 23) - 127;
  uint32_t expf;
  uint32_t mant;
  if (e < g.emin) {
    expf = 0;
    mant = static_cast<uint32_t>(Float(a) * Float(static_cast<uint32_t>(g.mbits - g.emin + 127) << 23));
  } else {
    expf = static_cast<uint32_t>(e - g.emin + 1);
    mant = (a >> (23 - g.mbits)) & ((1u << g.mbits) - 1u);
  }
  return static_cast<uint8_t>((sign << (g.ebits + g.mbits)) | (expf << g.mbits) | mant);
}

/// Exact 2^k for k in [-149, 127] (subnormals included).
QUARK_HD float Pow2(int k) {
  return Float(k >= -126 ? static_cast<uint32_t>(k + 127) << 23 : 1u << (k + 149));
}

/// 2^k is not a float for k > 127, yet an MXINT8 element x / 2^(e - 6) needs x * 2^(6 - e) with e down to -127: such
/// values are first multiplied by 2^kMxPrescaleExp, then by 2^(k - kMxPrescaleExp) (both steps exact for a block's
/// own elements; see kernels/cpu/mx_kernels.h).
inline constexpr int kMxPrescaleExp = 64;

/// x * 2^k, exact, for k in [-149, 127 + kMxPrescaleExp].
QUARK_HD float ScaleByPow2(float x, int k) {
  return k <= 127 ? x * Pow2(k) : (x * Pow2(kMxPrescaleExp)) * Pow2(k - kMxPrescaleExp);
}

/// OCP MX shared exponent of a block with the given amax (NaN-free, >= 0), for an element with `mbits` mantissa
/// bits and largest exponent `emax`; mode 0 even, 1 floor, 2 ceil (MxScaleMode order). In [-127, 127]; an
/// all-zero block gives -126.
QUARK_HD int MxSharedExponent(float amax, int mbits, int emax, int mode) {
  uint32_t b = Bits(amax) & 0x7FFFFFFFu;
  if (b == 0) return -126;
  // Even: add half an element ulp first, so an amax that rounds up at the element's precision moves up a binade.
  if (mode == 0) b = (b + (1u << (23 - mbits - 1))) & 0x7F800000u;
  int e = static_cast<int>(b >> 23) - 127;
  if (mode == 2 && (b & 0x7FFFFFu) != 0) e += 1;
  e -= emax;
  return e < -127 ? -127 : (e > 127 ? 127 : e);
}

/// The shared exponent e of a block scale s = 2^e, read from its float32 bits and clamped to [-127, 127]: zero,
/// subnormal and NaN scales give -127 (what clamping std::ilogb gives: subnormals are below 2^-126, and zero and NaN
/// give glibc's FP_ILOGB0 / FP_ILOGBNAN, INT_MIN).
QUARK_HD int MxScaleExponent(float s) {
  const uint32_t bits = Bits(s);
  const int field = static_cast<int>((bits >> 23) & 0xFFu);
  const bool nan = field == 0xFF && (bits & 0x7FFFFFu) != 0;
  if (field == 0 || nan) return -127;
  return field - 127 < 127 ? field - 127 : 127;
}

/// One MXINT8 element value: clamp(round(x * inv), -127, 127), keeping the sign of zero (as AMD Quark's
/// torch.round(x / scale) does).
template <int kMode>
QUARK_HD float MxIntValue(float x, float inv) {
  return Clamp(RoundKeepSign<kMode>(Clamp(x * inv, -128.0f, 128.0f)), -127.0f, 127.0f);
}

/// NVFP4 (formats-2026.md 1.6): fp4 e2m1 elements in groups of 16, each group's scale a float8_e4m3fn value times
/// one float32 global scale per tensor (Quark's `weight_scale_2`, a dequant multiplier).
inline constexpr int kNvfp4Group = 16;
/// 6 * 448: fp4's largest value times e4m3's.
inline constexpr float kNvfp4GlobalDivisor = 2688.0f;

/// Global scale of a tensor (or of fused shards) with the given amax: amax / (6 * 448) in one division; a zero amax
/// gives float32 epsilon and a non-finite one 1 (numerics.md: a zero scale is replaced by eps; min or max not
/// finite gives s = 1).
QUARK_HD float Nvfp4GlobalScale(float amax) {
  if (!(amax - amax == 0.0f)) return 1.0f;  // Inf or NaN
  const float g = amax / kNvfp4GlobalDivisor;
  return g == 0.0f ? 1.1920929e-07f : g;
}

/// The float8_e4m3fn block scale (as its float32 value) of a group with amax `amax_blk` under global scale `g`:
/// e4m3_RNE(amax_blk / (g * 6)), saturating at 448; a block that underflows to 0 gets 1.0 (Quark's realign).
QUARK_HD float Nvfp4BlockScale(float amax_blk, float g) {
  const float q = GridSat(amax_blk / (g * 6.0f), GridArgs{3, -6, 448.0f});
  return q == 0.0f || q != q ? 1.0f : q;
}

/// The fp4 grid value of one element: e2m1_RNE(clamp(x / (blk * g), -6, 6)); NaN stays NaN.
QUARK_HD float Nvfp4Value(float x, float blk, float g) {
  return GridSat(Clamp(x / (blk * g), -6.0f, 6.0f), GridArgs{1, 0, 6.0f});
}

/// Dequantized element: (value * blk) * g, in that order (what `e2m1 * weight_scale * weight_scale_2` computes).
QUARK_HD float Nvfp4Dequant(float value, float blk, float g) { return (value * blk) * g; }

/// One packed int4 word: nibble i (bits 4i..4i+3) holds code c[order[i]] of its 8 codes (numerics.md, "Packing for
/// export"); codes are masked to their low 4 bits (int4 two's complement).
QUARK_HD int32_t PackInt4Word(const uint8_t* c, const int* order) {
  uint32_t v = 0;
  for (int i = 0; i < 8; ++i) v |= (static_cast<uint32_t>(c[order[i]]) & 0xFu) << (4 * i);
  return static_cast<int32_t>(v);
}

/// Two fp4 codes in one byte, the even element in the low nibble.
QUARK_HD uint8_t PackFp4Byte(uint8_t even, uint8_t odd) {
  return static_cast<uint8_t>((even & 0xFu) | ((odd & 0xFu) << 4));
}

}  // namespace
