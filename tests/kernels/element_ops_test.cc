// The per-element math shared by the CPU and CUDA kernels (kernels/element/element_ops.h) against the definitions
// it must equal: c10's float <-> half / bfloat16 conversions (what LibTorch does on the CPU) and libm's rounding.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/element/element_ops.h"

namespace quark::kernels::element {
namespace {

// Every 65,521st float32 bit pattern (a prime stride reaches every exponent and sign, NaNs and subnormals
// included), plus the boundaries of the half and bfloat16 ranges.
template <typename F>
void ForSampledFloats(F f) {
  for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 65521) f(static_cast<uint32_t>(b));
  for (uint32_t b : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u,
                     0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x33800000u, 0x33000000u, 0x33000001u, 0x387FC000u,
                     0x7F7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x00000001u, 0x3F808000u, 0x3F818000u}) {
    f(b);
  }
}

TEST(ElementOpsTest, HalfToFloatIsC10sOnEveryHalf) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const float ours = HalfToFloat(static_cast<uint16_t>(h));
    const float c10s = c10::detail::fp16_ieee_to_fp32_value(static_cast<uint16_t>(h));
    ASSERT_EQ(Bits(ours), Bits(c10s)) << "half 0x" << std::hex << h;
  }
}

TEST(ElementOpsTest, HalfBitsIsC10sConversion) {
  ForSampledFloats([](uint32_t b) {
    const float f = Float(b);
    ASSERT_EQ(HalfBits(f), c10::detail::fp16_ieee_from_fp32_value(f)) << "float 0x" << std::hex << b;
  });
}

TEST(ElementOpsTest, Bf16BitsIsC10sConversion) {
  ForSampledFloats([](uint32_t b) {
    const float f = Float(b);
    ASSERT_EQ(Bf16Bits(f), c10::BFloat16(f).x) << "float 0x" << std::hex << b;
    ASSERT_EQ(Bits(Bf16ToFloat(c10::BFloat16(f).x)), Bits(static_cast<float>(c10::BFloat16(f))));
  });
}

TEST(ElementOpsTest, RoundingModesAreLibmsOnTheirRange) {
  // |v| <= 2^22, the range the kernels clamp to before rounding; ties and near-ties included.
  for (int64_t k = -(1 << 12); k <= (1 << 12); ++k) {
    for (float frac : {0.0f, 0.25f, 0.5f, 0.75f, 0.49999997f, 0.50000006f}) {
      for (float scale : {1.0f, 1024.0f}) {
        const float v = (static_cast<float>(k) + frac) * scale;
        ASSERT_EQ(Bits(Round<0>(v)), Bits(std::nearbyint(v) == 0.0f ? 0.0f : std::nearbyint(v))) << v;
        ASSERT_EQ(Round<1>(v), std::round(v)) << v;
        ASSERT_EQ(Round<2>(v), std::floor(v)) << v;
        ASSERT_EQ(Bits(RoundKeepSign<0>(v)), Bits(std::nearbyint(v))) << v;
      }
    }
  }
}

TEST(ElementOpsTest, MxSharedExponentFollowsTheScaleModes) {
  // fp4 (mbits 1, emax 2): floor(log2 6) = 2 -> floor 0; 6 = 1.1b * 2^2 is on fp4's grid, so even keeps 0, while
  // 7 = 1.11b * 2^2 rounds up a binade -> 1; ceil of anything but a power of two -> 1. Zero gives -126; +Inf's
  // exponent 128 minus emax.
  EXPECT_EQ(MxSharedExponent(6.0f, 1, 2, 1), 0);
  EXPECT_EQ(MxSharedExponent(6.0f, 1, 2, 0), 0);
  EXPECT_EQ(MxSharedExponent(7.0f, 1, 2, 0), 1);
  EXPECT_EQ(MxSharedExponent(7.0f, 1, 2, 1), 0);
  EXPECT_EQ(MxSharedExponent(6.0f, 1, 2, 2), 1);
  EXPECT_EQ(MxSharedExponent(4.0f, 1, 2, 2), 0);
  EXPECT_EQ(MxSharedExponent(0.0f, 1, 2, 0), -126);
  EXPECT_EQ(MxSharedExponent(Float(0x7F800000u), 1, 2, 0), 126);
  EXPECT_EQ(MxSharedExponent(Float(1u), 6, 0, 1), -127);
}

}  // namespace
}  // namespace quark::kernels::element
