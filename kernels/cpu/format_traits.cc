#include "kernels/cpu/format_traits.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/cpu/float_grid.h"

namespace quark::kernels {
namespace {

struct FloatParams {
  int ebits;
  int mbits;
  float max;
  bool has_inf;
  bool has_nan;
  int Bias() const { return (1 << (ebits - 1)) - 1; }
  int Emin() const { return 1 - Bias(); }
  int Bits() const { return 1 + ebits + mbits; }
};

constexpr FloatParams kFp8E4M3{4, 3, 448.0f, false, true};
constexpr FloatParams kFp8E5M2{5, 2, 57344.0f, true, true};
constexpr FloatParams kFp6E3M2{3, 2, 28.0f, false, false};
constexpr FloatParams kFp6E2M3{2, 3, 7.5f, false, false};
constexpr FloatParams kFp4E2M1{2, 1, 6.0f, false, false};

// Reference rounding written with frexp / ldexp / nearbyint in double, independently of the bit tricks.
float RoundFloatRef(float x, const FloatParams& p) {
  if (std::isnan(x) || std::isinf(x)) return x;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= p.max) return std::copysign(p.max, x);
  if (a == 0.0) return x;
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e with f in [0.5, 1): floor(log2(a)) = e - 1
  const int ex = std::max(e - 1, p.Emin());
  const double quantum = std::ldexp(1.0, ex - p.mbits);
  const double r = std::min(std::nearbyint(a / quantum) * quantum, static_cast<double>(p.max));
  return std::copysign(static_cast<float>(r), x);
}

uint8_t EncodeFloatRef(float x, const FloatParams& p) {
  const uint32_t sign = std::signbit(x) ? 1u : 0u;
  const uint32_t sign_bit = sign << (p.ebits + p.mbits);
  if (std::isnan(x)) {
    if (!p.has_nan) return 0;
    return static_cast<uint8_t>(sign_bit | (p.ebits == 4 ? 0x7Fu : 0x7Eu));
  }
  if (std::isinf(x) && p.has_inf) return static_cast<uint8_t>(sign_bit | (0x1Fu << p.mbits));
  const double a = std::fabs(static_cast<double>(RoundFloatRef(std::isinf(x) ? std::copysign(p.max, x) : x, p)));
  if (a < std::ldexp(1.0, p.Emin())) {
    const auto mant = static_cast<uint32_t>(a / std::ldexp(1.0, p.Emin() - p.mbits));
    return static_cast<uint8_t>(sign_bit | mant);
  }
  int e = 0;
  const double f = std::frexp(a, &e);  // a = (2f) * 2^(e-1)
  const auto expf = static_cast<uint32_t>(e - 1 + p.Bias());
  const auto mant = static_cast<uint32_t>((2.0 * f - 1.0) * std::ldexp(1.0, p.mbits));
  return static_cast<uint8_t>(sign_bit | (expf << p.mbits) | mant);
}

float DecodeFloatRef(uint8_t code, const FloatParams& p) {
  const uint32_t mant_mask = (1u << p.mbits) - 1u;
  const uint32_t exp_mask = (1u << p.ebits) - 1u;
  const bool negative = ((code >> (p.ebits + p.mbits)) & 1u) != 0;
  const uint32_t expf = (code >> p.mbits) & exp_mask;
  const uint32_t mant = code & mant_mask;
  double v;
  if (p.has_inf && expf == exp_mask) {
    v = mant == 0 ? INFINITY : NAN;
  } else if (p.has_nan && !p.has_inf && expf == exp_mask && mant == mant_mask) {
    v = NAN;
  } else if (expf == 0) {
    v = std::ldexp(static_cast<double>(mant), p.Emin() - p.mbits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -p.mbits), static_cast<int>(expf) - p.Bias());
  }
  return static_cast<float>(negative ? -v : v);
}

template <const FloatParams& P>
float RoundRefOf(float x) {
  return RoundFloatRef(x, P);
}
template <const FloatParams& P>
uint8_t EncodeRefOf(float x) {
  return EncodeFloatRef(x, P);
}
template <const FloatParams& P>
float DecodeRefOf(uint8_t code) {
  return DecodeFloatRef(code, P);
}

template <int kMin, int kMax>
float IntRoundRef(float x) {
  if (std::isnan(x)) return x;
  return static_cast<float>(std::clamp(std::nearbyint(static_cast<double>(x)), double{kMin}, double{kMax}));
}
template <int kMin, int kMax, int kBits>
uint8_t IntEncodeRef(float x) {
  const auto q = static_cast<int>(std::isnan(x) ? 0.0f : IntRoundRef<kMin, kMax>(x));
  return static_cast<uint8_t>(static_cast<uint32_t>(q) & ((1u << kBits) - 1u));
}
template <int kMin, int kBits>
float IntDecodeRef(uint8_t code) {
  const int v = code & ((1 << kBits) - 1);
  // Signed grids sign-extend the top bit.
  return static_cast<float>(kMin < 0 && v >= (1 << (kBits - 1)) ? v - (1 << kBits) : v);
}

template <ElemFormat F, int kMin, int kMax, int kBits>
constexpr FormatTraits IntRow(std::string_view name) {
  return FormatTraits{F,     name, kBits, false, kMin, kMax, 0, 0, 0, 0, 0, static_cast<float>(kMax), false, false,
                      &IntRoundRef<kMin, kMax>, &IntEncodeRef<kMin, kMax, kBits>, &IntDecodeRef<kMin, kBits>};
}

template <ElemFormat F, const FloatParams& P>
FormatTraits FloatRow(std::string_view name) {
  // emax: the largest exponent of a finite value (numerics.md, MX: fp4 2, fp6_e2m3 2, fp6_e3m2 4, e4m3 8, e5m2 15).
  int e = 0;
  std::frexp(static_cast<double>(P.max), &e);
  return FormatTraits{F,       name,       P.Bits(),   true,      0,         0,         P.ebits, P.mbits, P.Bias(),
                      P.Emin(), e - 1,     P.max,      P.has_inf, P.has_nan, &RoundRefOf<P>, &EncodeRefOf<P>,
                      &DecodeRefOf<P>};
}

const std::array<FormatTraits, kNumElemFormats>& Table() {
  static const std::array<FormatTraits, kNumElemFormats> table = {
      IntRow<ElemFormat::kInt8, -128, 127, 8>("int8"),
      IntRow<ElemFormat::kUInt8, 0, 255, 8>("uint8"),
      IntRow<ElemFormat::kInt4, -8, 7, 4>("int4"),
      IntRow<ElemFormat::kUInt4, 0, 15, 4>("uint4"),
      IntRow<ElemFormat::kInt3, -4, 3, 3>("int3"),
      IntRow<ElemFormat::kInt2, -2, 1, 2>("int2"),
      FloatRow<ElemFormat::kFp8E4M3, kFp8E4M3>("fp8_e4m3"),
      FloatRow<ElemFormat::kFp8E5M2, kFp8E5M2>("fp8_e5m2"),
      FloatRow<ElemFormat::kFp6E3M2, kFp6E3M2>("fp6_e3m2"),
      FloatRow<ElemFormat::kFp6E2M3, kFp6E2M3>("fp6_e2m3"),
      FloatRow<ElemFormat::kFp4E2M1, kFp4E2M1>("fp4"),
  };
  return table;
}

}  // namespace

const FormatTraits& Traits(ElemFormat format) { return Table()[static_cast<size_t>(format)]; }

const FormatTraits* AllTraits() { return Table().data(); }

const float* DecodeTable(ElemFormat format) {
  static const auto tables = [] {
    std::array<std::array<float, 256>, kNumElemFormats> t{};
    for (int f = 0; f < kNumElemFormats; ++f) {
      const FormatTraits& row = Table()[f];
      for (int c = 0; c < 256; ++c) t[f][c] = c < (1 << row.bits) ? row.decode_ref(static_cast<uint8_t>(c)) : 0.0f;
    }
    return t;
  }();
  return tables[static_cast<size_t>(format)].data();
}

}  // namespace quark::kernels
