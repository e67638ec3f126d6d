// Hand-written AVX2 loops for bfloat16 data (compiled with -mavx2 -mfma -mf16c, see CMakeLists.txt). They use no
// fused multiply-add, and must not: the results rely on separately rounded products and sums, which the target's
// -ffp-contract=off keeps GCC and clang from contracting.
//
// Why by hand: GCC's vectorization of the generic fused loops (lane_ops.h) spends about 68 instructions on 16
// bfloat16 elements of int8 fake quantization: it widens with extract + zero-extend, pre-clamps for the add/sub
// rounding trick, turns one clamp into compare + blend, and narrows with pack + permute and a separate NaN pass.
// These loops do the same arithmetic in about half the instructions:
//  - 16 bfloat16 values are one 256-bit load, split into even and odd elements by one shift and one mask (each
//    already a float32 in its 32-bit lane); the results are merged back by one shift and one word blend, so the
//    element order never needs a permute;
//  - rounding to an integer is one vroundps (half away from zero adds a tie fix-up), exact at any magnitude, so the
//    generic loops' pre-clamp for their add/sub trick is not needed where that trick is exact (the guards below);
//    +0.0 is added where the generic affine loops give +0 for a -0 (the results must be the same bits);
//  - clamps are vmaxps / vminps with the bound first, which keeps a NaN element NaN, as the generic Clamp does;
//  - NaN results (-> 0x7FC0) and the sign of zero results are set once per 16 words from the input words (Finish),
//    instead of a compare and blend per 8 results.
// Parameters outside what these arguments need (an infinite scale, a zero reciprocal, a zero point beyond 2^20, a
// grid that is not a small float format, ...) are sent to the generic loop, so every entry equals the generic loop
// bit for bit: tests/numerics/bf16_lanes_test.cc runs both on all 65,536 bfloat16 bit patterns, for every rounding
// mode, zero-point kind, group layout and grid, with regular and degenerate parameters, and on every tail length.
#include "kernels/cpu/bf16_lanes_avx2.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#define QUARK_LANE_NS avx2
#include "kernels/cpu/lane_ops.h"

namespace quark::kernels {
namespace {

constexpr int64_t kVector = 16;  // bfloat16 elements per 256-bit register

inline __m256 SplatBits(uint32_t bits) { return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(bits))); }

// The even elements (0, 2, ..., 14) of 16 bfloat16 words as float32, and the odd ones.
inline __m256 EvenElements(__m256i w) { return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)); }
inline __m256 OddElements(__m256i w) {
  return _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// float32 -> bfloat16 bits in the high half of each lane, rounded to nearest even. NaN lanes give garbage: the
// caller replaces them (ToBf16Words).
inline __m256i RoundedToHighHalf(__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)), lsb);
}

// What an op promises about its results, which decides how NaN (-> 0x7FC0, as c10::BFloat16 and Bf16Bits in
// lane_ops.h) and signs are finished: on the 16 input words at once, instead of a compare per 8 results.
enum class Finish {
  kNanOfInput,         // a result is NaN exactly where its input is
  kSignAndNanOfInput,  // also: every other result has its input's sign (the op may return +0 for a -0)
};

// The 16 results (even and odd elements of the input words w) as bfloat16 words in input order: the even results
// go to the low halves, the odd ones stay in the high halves, so no permute is needed.
template <Finish kFinish>
inline __m256i ToBf16Words(__m256 even, __m256 odd, __m256i w) {
  __m256i words = _mm256_blend_epi16(_mm256_srli_epi32(RoundedToHighHalf(even), 16), RoundedToHighHalf(odd), 0xAA);
  if constexpr (kFinish == Finish::kSignAndNanOfInput) {
    words = _mm256_or_si256(words, _mm256_and_si256(w, _mm256_set1_epi16(static_cast<int16_t>(0x8000))));
  }
  const __m256i nan = _mm256_cmpgt_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7F80));
  return _mm256_blendv_epi8(words, _mm256_set1_epi16(0x7FC0), nan);
}

template <typename Op>
inline __m256i QuantizeVector(__m256i w, const Op& op) {
  return ToBf16Words<Op::kFinish>(op(EvenElements(w)), op(OddElements(w)), w);
}

// y[i] = op(x[i]) for i < n, 16 elements at a time; x may equal y. A tail shorter than a vector goes through a
// zero-padded copy, so no load or store crosses the ends. Always inlined, so the op's constants stay in registers.
template <typename Op>
__attribute__((always_inline)) inline void MapBf16(const uint16_t* x, uint16_t* y, int64_t n, const Op& op) {
  int64_t i = 0;
  for (; i + kVector <= n; i += kVector) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), QuantizeVector(w, op));
  }
  if (i < n) {
    alignas(32) uint16_t tail[kVector] = {};
    const auto bytes = static_cast<size_t>(n - i) * sizeof(uint16_t);
    std::memcpy(tail, x + i, bytes);
    const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(tail));
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail), QuantizeVector(w, op));
    std::memcpy(y + i, tail, bytes);
  }
}

// y = op_k(x) on [0, n), where op_k = make_op(k) serves block k = [k * block, (k + 1) * block) (MX blocks,
// per_group groups). When block is a multiple of 16 every vector lies in one block, so the op's per-block constants
// are set once per block and the loop has no per-block tail; otherwise each block is mapped on its own.
template <typename MakeOp>
void MapBf16Blocks(const uint16_t* x, uint16_t* y, int64_t n, int64_t block, const MakeOp& make_op) {
  if (block % kVector != 0) {
    for (int64_t k = 0, begin = 0; begin < n; ++k, begin += block) {
      MapBf16(x + begin, y + begin, n - begin < block ? n - begin : block, make_op(k));
    }
    return;
  }
  const int64_t full_blocks = n / block;
  for (int64_t k = 0; k < full_blocks; ++k) {
    const auto op = make_op(k);
    for (int64_t i = k * block, end = i + block; i < end; i += kVector) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), QuantizeVector(w, op));
    }
  }
  const int64_t done = full_blocks * block;
  if (done < n) MapBf16(x + done, y + done, n - done, make_op(full_blocks));
}

// Whether pred(k) holds for every block of n elements.
template <typename Pred>
bool EveryBlock(int64_t n, int64_t block, Pred pred) {
  for (int64_t k = 0; k * block < n; ++k) {
    if (!pred(k)) return false;
  }
  return true;
}

// Rounding to an integer value, modes as in lane_ops.h (0 half even, 1 half away, 2 floor). May return -0.
template <int kMode>
inline __m256 RoundToInteger(__m256 v) {
  if constexpr (kMode == 0) return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if constexpr (kMode == 2) return _mm256_round_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  // Half away from zero: only exact ties (|v - rne(v)| == 0.5) differ from half even; they move away from zero.
  const __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 tie = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(v, r), SplatBits(0x7FFFFFFFu)), _mm256_set1_ps(0.5f),
                                   _CMP_EQ_OQ);
  const __m256 away = _mm256_add_ps(v, _mm256_or_ps(_mm256_and_ps(v, SplatBits(0x80000000u)), _mm256_set1_ps(0.5f)));
  return _mm256_blendv_ps(r, away, tie);
}

// lo <= v <= hi, keeping NaN (vmaxps / vminps return their second operand when either is NaN).
inline __m256 ClampKeepNan(__m256 v, __m256 lo, __m256 hi) { return _mm256_min_ps(hi, _mm256_max_ps(lo, v)); }

inline bool IsFinite(float v) { return (avx2::Bits(v) & 0x7F800000u) != 0x7F800000u; }
inline bool IsPlusZero(float v) { return avx2::Bits(v) == 0; }
inline bool IsFinitePositive(float v) { return v > 0.0f && IsFinite(v); }
inline bool AtMost(float v, float bound) { return v >= -bound && v <= bound; }  // false for NaN

// The generic loops round with an add/sub trick that is exact for |v| <= 2^22 and pre-clamp v into
// [qmin - z - 1, qmax - z + 1] (float zero point: [qmin - 1, qmax + 1]); with |z|, |qmin|, |qmax| <= 2^20 that range
// is inside 2^22, so their rounding equals vroundps. Finite parameters and inv != 0 also make a result NaN only
// where its input is (clamping maps infinities into the range).
inline bool AffineParamsAreRegular(float s, float inv, float z, float qmin, float qmax) {
  constexpr float kBound = 1048576.0f;  // 2^20
  return IsFinite(s) && IsFinite(inv) && inv != 0.0f && AtMost(z, kBound) && AtMost(qmin, kBound) &&
         AtMost(qmax, kBound);
}

// GridRounder's arithmetic holds for the small float formats (fp8 / fp6 / fp4 and the like): a few mantissa bits,
// a normal emin, and a max far from float32 overflow (the generic magic number must not become infinite).
inline bool IsSmallFloatGrid(const GridArgs& g) {
  return g.mbits >= 0 && g.mbits <= 10 && g.emin >= -126 && g.emin <= 64 && g.max > 0.0f && g.max < 1e18f;
}

// The affine fake quantization of lane_ops.h's AffineRunT: (code - z) * s with code = clamp(round(x * inv) + z), or
// with a float zero point code = clamp(round(x * inv + z)). kZeroIsPlusZero: z is +0.0, so "- z" changes no bit.
// Valid for AffineParamsAreRegular parameters.
template <int kMode, bool kFloatZp, bool kZeroIsPlusZero>
struct AffineOp {
  static constexpr Finish kFinish = Finish::kNanOfInput;
  __m256 s, inv, z, qmin, qmax;
  AffineOp(float s_, float inv_, float z_, float qmin_, float qmax_)
      : s(_mm256_set1_ps(s_)),
        inv(_mm256_set1_ps(inv_)),
        z(_mm256_set1_ps(z_)),
        qmin(_mm256_set1_ps(qmin_)),
        qmax(_mm256_set1_ps(qmax_)) {}
  __m256 operator()(__m256 x) const {
    __m256 code;
    if constexpr (kFloatZp) {
      // + 0.0: the generic rounding never yields -0, and "(-0 - z) * s" would keep the sign.
      code = _mm256_add_ps(RoundToInteger<kMode>(_mm256_add_ps(_mm256_mul_ps(x, inv), z)), _mm256_setzero_ps());
    } else {
      code = _mm256_add_ps(RoundToInteger<kMode>(_mm256_mul_ps(x, inv)), z);
    }
    code = ClampKeepNan(code, qmin, qmax);
    if constexpr (!kZeroIsPlusZero) code = _mm256_sub_ps(code, z);
    return _mm256_mul_ps(code, s);
  }
};

template <int kMode, bool kFloatZp>
void AffineRun(const uint16_t* x, uint16_t* y, int64_t n, float s, float inv, float z, float qmin, float qmax) {
  if (!AffineParamsAreRegular(s, inv, z, qmin, qmax)) {
    avx2::AffineRunT<kMode, kFloatZp, avx2::Bf16Codec>(x, y, n, s, inv, z, qmin, qmax);
  } else if (IsPlusZero(z)) {
    MapBf16(x, y, n, AffineOp<kMode, kFloatZp, true>(s, inv, z, qmin, qmax));
  } else {
    MapBf16(x, y, n, AffineOp<kMode, kFloatZp, false>(s, inv, z, qmin, qmax));
  }
}

template <int kMode, bool kFloatZp>
void AffineGroups(const uint16_t* x, uint16_t* y, int64_t n, int64_t g, const float* s, const float* inv,
                  const float* z, float qmin, float qmax) {
  // Short groups (padded tails would cost more) or degenerate parameters: the generic loop.
  if (g < kVector ||
      !EveryBlock(n, g, [&](int64_t k) { return AffineParamsAreRegular(s[k], inv[k], z[k], qmin, qmax); })) {
    avx2::AffineGroupsT<kMode, kFloatZp, avx2::Bf16Codec>(x, y, n, g, s, inv, z, qmin, qmax);
    return;
  }
  auto map = [&](auto op_for_group) { MapBf16Blocks(x, y, n, g, op_for_group); };
  if (EveryBlock(n, g, [&](int64_t k) { return IsPlusZero(z[k]); })) {
    map([&](int64_t k) { return AffineOp<kMode, kFloatZp, true>(s[k], inv[k], z[k], qmin, qmax); });
  } else {
    map([&](int64_t k) { return AffineOp<kMode, kFloatZp, false>(s[k], inv[k], z[k], qmin, qmax); });
  }
}

// Rounding onto a small float format's grid with saturation, as lane_ops.h's GridSat, on signed values: v is
// clamped to [-max, max] and rounded to mbits mantissa bits by adding and subtracting 1.5 * 2^(e - mbits + 23)
// (e = max(exponent of v, emin)); the 1.5 keeps v + m in m's binade for either sign, so the ulp of the sum is the
// grid step and the rounding is to nearest even as in GridSat. Unlike GridSat a negative v that rounds to zero
// gives +0: the ops using it finish with the input's sign (Finish::kSignAndNanOfInput).
struct GridRounder {
  __m256 max, neg_max;
  __m256i emin_bits;  // (emin + 127) << 23
  __m256i magic;      // added to a biased exponent field (<< 23): 1.5 * 2^(23 - mbits) times its power of two
  explicit GridRounder(const GridArgs& g)
      : max(_mm256_set1_ps(g.max)),
        neg_max(_mm256_set1_ps(-g.max)),
        emin_bits(_mm256_set1_epi32((g.emin + 127) << 23)),
        magic(_mm256_set1_epi32(((23 - g.mbits) << 23) | 0x400000)) {}
  __m256 operator()(__m256 v) const {
    const __m256 c = ClampKeepNan(v, neg_max, max);
    const __m256i e = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(c), _mm256_set1_epi32(0x7F800000)),
                                       emin_bits);
    const __m256 m = _mm256_castsi256_ps(_mm256_add_epi32(e, magic));
    return _mm256_sub_ps(_mm256_add_ps(c, m), m);
  }
};

// lane_ops.h's FloatRunT: grid(clamp(x / s, -max, max)) * s. The division stays a division (bit-exact contract).
// With 0 < s < inf, x / s and the result have x's sign, and only a NaN x gives a NaN.
struct ScaledGridOp {
  static constexpr Finish kFinish = Finish::kSignAndNanOfInput;
  __m256 s;
  const GridRounder& grid;  // a reference: copying four vectors per block went through the stack
  ScaledGridOp(float s_, const GridRounder& g) : s(_mm256_set1_ps(s_)), grid(g) {}
  __m256 operator()(__m256 x) const { return _mm256_mul_ps(grid(_mm256_div_ps(x, s)), s); }
};

void FloatRun(const uint16_t* x, uint16_t* y, int64_t n, float s, const GridArgs& g) {
  if (!IsFinitePositive(s) || !IsSmallFloatGrid(g)) {
    avx2::FloatRunT<avx2::Bf16Codec>(x, y, n, s, g);
    return;
  }
  const GridRounder grid(g);
  MapBf16(x, y, n, ScaledGridOp(s, grid));
}

void FloatGroups(const uint16_t* x, uint16_t* y, int64_t n, int64_t group, const float* s, const GridArgs& g) {
  if (group < kVector || !IsSmallFloatGrid(g) ||
      !EveryBlock(n, group, [&](int64_t k) { return IsFinitePositive(s[k]); })) {
    avx2::FloatGroupsT<avx2::Bf16Codec>(x, y, n, group, s, g);
    return;
  }
  const GridRounder grid(g);
  MapBf16Blocks(x, y, n, group, [&](int64_t k) { return ScaledGridOp(s[k], grid); });
}

// MX blocks of 32: element values x * 2^-e (exact), rounded, times 2^e. The kernels pass finite positive powers of
// two (prescaled blocks go through the float32 route); any finite positive multipliers keep the Finish promises,
// and that is what is checked.
constexpr int64_t kBlock = 32;

struct MxGridOp {
  static constexpr Finish kFinish = Finish::kSignAndNanOfInput;
  __m256 inv, s;
  const GridRounder& grid;
  MxGridOp(float inv_, float s_, const GridRounder& g) : inv(_mm256_set1_ps(inv_)), s(_mm256_set1_ps(s_)), grid(g) {}
  __m256 operator()(__m256 x) const { return _mm256_mul_ps(grid(_mm256_mul_ps(x, inv)), s); }
};

// lane_ops.h's MxIntT: clamp(round(x * inv), -127, 127) * s; its pre-clamp to +-128 only served the add/sub
// rounding trick. vroundps keeps the sign of zero, as MxIntT's RoundKeepSign does (a negative x that rounds to zero
// gives -0, as in AMD Quark), and with 0 < s < inf the product keeps it, so no sign finishing is needed.
template <int kMode>
struct MxIntOp {
  static constexpr Finish kFinish = Finish::kNanOfInput;
  __m256 inv, s;
  MxIntOp(float inv_, float s_) : inv(_mm256_set1_ps(inv_)), s(_mm256_set1_ps(s_)) {}
  __m256 operator()(__m256 x) const {
    const __m256 code = RoundToInteger<kMode>(_mm256_mul_ps(x, inv));
    return _mm256_mul_ps(ClampKeepNan(code, _mm256_set1_ps(-127.0f), _mm256_set1_ps(127.0f)), s);
  }
};

bool MxBlocksAreRegular(int64_t n, const float* inv, const float* s) {
  return EveryBlock(n, kBlock, [&](int64_t b) { return IsFinitePositive(inv[b]) && IsFinitePositive(s[b]); });
}

void MxGrid(const uint16_t* x, uint16_t* y, int64_t n, const float* inv, const float* s, const GridArgs& g) {
  if (!IsSmallFloatGrid(g) || !MxBlocksAreRegular(n, inv, s)) {
    avx2::MxGridT<avx2::Bf16Codec>(x, y, n, inv, s, g);
    return;
  }
  const GridRounder grid(g);
  MapBf16Blocks(x, y, n, kBlock, [&](int64_t b) { return MxGridOp(inv[b], s[b], grid); });
}

template <int kMode>
void MxInt(const uint16_t* x, uint16_t* y, int64_t n, const float* inv, const float* s) {
  if (!MxBlocksAreRegular(n, inv, s)) {
    avx2::MxIntT<kMode, avx2::Bf16Codec>(x, y, n, inv, s);
    return;
  }
  MapBf16Blocks(x, y, n, kBlock, [&](int64_t b) { return MxIntOp<kMode>(inv[b], s[b]); });
}

// amax of each block of 32, NaN ignored (lane_ops.h's BlockAmaxT). For non-negative floats the order of the bit
// patterns is the order of the values, so the maximum is taken on the 16-bit magnitudes, NaNs zeroed first; the
// horizontal maximum is phminposuw on 0x7FFF - magnitude.
void BlockAmax(const uint16_t* x, int64_t n, float* amax) {
  const __m256i magnitude = _mm256_set1_epi16(0x7FFF);
  const __m256i inf = _mm256_set1_epi16(0x7F80);
  auto magnitudes = [&](const uint16_t* p) {
    const __m256i a = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), magnitude);
    return _mm256_andnot_si256(_mm256_cmpgt_epi16(a, inf), a);  // NaN (above +inf) -> 0
  };
  int64_t b = 0;
  for (; (b + 1) * kBlock <= n; ++b) {
    const __m256i m = _mm256_max_epi16(magnitudes(x + b * kBlock), magnitudes(x + b * kBlock + kVector));
    const __m128i m8 = _mm_max_epi16(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    const __m128i flipped = _mm_minpos_epu16(_mm_sub_epi16(_mm256_castsi256_si128(magnitude), m8));
    const auto bits = static_cast<uint32_t>(0x7FFF - _mm_extract_epi16(flipped, 0));
    amax[b] = avx2::Float(bits << 16);
  }
  if (b * kBlock < n) avx2::BlockAmaxT<avx2::Bf16Codec>(x + b * kBlock, n - b * kBlock, amax + b);
}

}  // namespace

Bf16LaneTable HandWrittenAvx2Bf16Lanes(const Bf16LaneTable& generic) {
  Bf16LaneTable t = generic;
  t.affine_run[0][0] = &AffineRun<0, false>;
  t.affine_run[0][1] = &AffineRun<0, true>;
  t.affine_run[1][0] = &AffineRun<1, false>;
  t.affine_run[1][1] = &AffineRun<1, true>;
  t.affine_run[2][0] = &AffineRun<2, false>;
  t.affine_run[2][1] = &AffineRun<2, true>;
  t.affine_groups[0][0] = &AffineGroups<0, false>;
  t.affine_groups[0][1] = &AffineGroups<0, true>;
  t.affine_groups[1][0] = &AffineGroups<1, false>;
  t.affine_groups[1][1] = &AffineGroups<1, true>;
  t.affine_groups[2][0] = &AffineGroups<2, false>;
  t.affine_groups[2][1] = &AffineGroups<2, true>;
  t.float_run = &FloatRun;
  t.float_groups = &FloatGroups;
  t.mx_grid = &MxGrid;
  t.mx_int[0] = &MxInt<0>;
  t.mx_int[1] = &MxInt<1>;
  t.mx_int[2] = &MxInt<2>;
  t.block_amax = &BlockAmax;
  return t;
}

}  // namespace quark::kernels
