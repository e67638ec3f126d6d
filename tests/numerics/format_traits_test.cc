// Every code of every float format, ties, saturation, NaN / Inf and subnormals; fast grid paths against the Refs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/float_grid.h"
#include "kernels/cpu/format_traits.h"

namespace quark::kernels {
namespace {

std::vector<const FormatTraits*> FloatRows() {
  std::vector<const FormatTraits*> rows;
  for (int i = 0; i < kNumElemFormats; ++i) {
    if (AllTraits()[i].is_float) rows.push_back(&AllTraits()[i]);
  }
  return rows;
}

bool SameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || BitsOf(a) == BitsOf(b); }

TEST(FormatTraitsTest, TableRowsMatchTheSpec) {
  EXPECT_EQ(Traits(ElemFormat::kFp8E4M3).max, 448.0f);
  EXPECT_EQ(Traits(ElemFormat::kFp8E5M2).max, 57344.0f);
  EXPECT_EQ(Traits(ElemFormat::kFp6E3M2).max, 28.0f);
  EXPECT_EQ(Traits(ElemFormat::kFp6E2M3).max, 7.5f);
  EXPECT_EQ(Traits(ElemFormat::kFp4E2M1).max, 6.0f);
  EXPECT_EQ(Traits(ElemFormat::kFp4E2M1).emax, 2);
  EXPECT_EQ(Traits(ElemFormat::kFp6E2M3).emax, 2);
  EXPECT_EQ(Traits(ElemFormat::kFp6E3M2).emax, 4);
  EXPECT_EQ(Traits(ElemFormat::kFp8E4M3).emax, 8);
  EXPECT_EQ(Traits(ElemFormat::kFp8E5M2).emax, 15);
  EXPECT_EQ(Traits(ElemFormat::kInt4).qmin, -8);
  EXPECT_EQ(Traits(ElemFormat::kInt2).qmax, 1);
  for (int i = 0; i < kNumElemFormats; ++i) EXPECT_EQ(static_cast<int>(AllTraits()[i].format), i);
}

TEST(FormatTraitsTest, EveryCodeDecodesAndReencodesToItself) {
  for (const FormatTraits* t : FloatRows()) {
    const GridConsts g = MakeGrid(*t);
    for (int c = 0; c < (1 << t->bits); ++c) {
      const float v = t->decode_ref(static_cast<uint8_t>(c));
      EXPECT_TRUE(SameFloat(DecodeTable(t->format)[c], v)) << t->name;
      if (std::isnan(v)) {
        EXPECT_TRUE(t->has_nan) << t->name << " code " << c;
        EXPECT_TRUE(std::isnan(t->decode_ref(t->encode_ref(v)))) << t->name;
        continue;
      }
      if (std::isinf(v)) {
        EXPECT_TRUE(t->has_inf) << t->name;
        EXPECT_EQ(t->encode_ref(v), c) << t->name;
        continue;
      }
      EXPECT_EQ(t->encode_ref(v), c) << t->name << " code " << c << " value " << v;
      EXPECT_EQ(EncodeGridValue(v, g), c) << t->name << " code " << c;
      EXPECT_TRUE(SameFloat(t->round_ref(v), v)) << t->name << " code " << c;
      EXPECT_TRUE(SameFloat(RoundToGrid(v, g), v)) << t->name << " code " << c;
    }
  }
}

// Sorted non-negative finite grid values of a format.
std::vector<float> PositiveGrid(const FormatTraits& t) {
  std::vector<float> v;
  for (int c = 0; c < (1 << (t.bits - 1)); ++c) {
    const float f = t.decode_ref(static_cast<uint8_t>(c));
    if (std::isfinite(f)) v.push_back(f);
  }
  std::sort(v.begin(), v.end());
  return v;
}

TEST(FormatTraitsTest, HalfwayValuesRoundToTheEvenCode) {
  for (const FormatTraits* t : FloatRows()) {
    const GridConsts g = MakeGrid(*t);
    const std::vector<float> grid = PositiveGrid(*t);
    for (size_t i = 0; i + 1 < grid.size(); ++i) {
      const float mid = (grid[i] + grid[i + 1]) / 2;  // exact: neighbours differ by one quantum
      const uint8_t lo = t->encode_ref(grid[i]);
      const float expected = (lo & 1) == 0 ? grid[i] : grid[i + 1];
      EXPECT_EQ(t->round_ref(mid), expected) << t->name << " between " << grid[i] << " and " << grid[i + 1];
      EXPECT_EQ(RoundToGrid(mid, g), expected) << t->name << " between " << grid[i] << " and " << grid[i + 1];
      EXPECT_EQ(RoundToGrid(-mid, g), -expected) << t->name;
      EXPECT_EQ(t->encode_ref(mid) & 1, 0) << t->name;
    }
  }
}

TEST(FormatTraitsTest, SaturatesNanAndInfPassThrough) {
  for (const FormatTraits* t : FloatRows()) {
    const GridConsts g = MakeGrid(*t);
    EXPECT_EQ(RoundToGrid(t->max * 1.5f, g), t->max) << t->name;
    EXPECT_EQ(RoundToGrid(-t->max * 100.0f, g), -t->max) << t->name;
    EXPECT_EQ(RoundToGridSaturate(INFINITY, g), t->max) << t->name;
    EXPECT_EQ(t->round_ref(3.0e38f), t->max) << t->name;
    EXPECT_TRUE(std::isnan(RoundToGrid(NAN, g))) << t->name;
    EXPECT_TRUE(std::isnan(t->round_ref(NAN))) << t->name;
    EXPECT_EQ(RoundToGrid(INFINITY, g), INFINITY) << t->name;
    EXPECT_EQ(RoundToGrid(-INFINITY, g), -INFINITY) << t->name;
    // Encoding saturates too (e5m2 keeps its Inf code for an Inf input).
    EXPECT_EQ(t->decode_ref(t->encode_ref(t->max * 4.0f)), t->max) << t->name;
  }
  EXPECT_EQ(Traits(ElemFormat::kFp8E4M3).encode_ref(NAN), 0x7F);
  EXPECT_EQ(Traits(ElemFormat::kFp8E5M2).encode_ref(INFINITY), 0x7C);
  EXPECT_EQ(Traits(ElemFormat::kFp4E2M1).encode_ref(INFINITY), 0x7);
}

TEST(FormatTraitsTest, SubnormalsAndUnderflow) {
  const FormatTraits& e4m3 = Traits(ElemFormat::kFp8E4M3);
  EXPECT_EQ(e4m3.decode_ref(0x01), std::ldexp(1.0f, -9));   // smallest subnormal
  EXPECT_EQ(e4m3.decode_ref(0x08), std::ldexp(1.0f, -6));   // smallest normal
  EXPECT_EQ(e4m3.round_ref(std::ldexp(1.0f, -10)), 0.0f);   // half the smallest subnormal: ties to even (0)
  EXPECT_EQ(e4m3.round_ref(std::ldexp(1.5f, -10)), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3.round_ref(std::ldexp(1.5f, -9)), std::ldexp(1.0f, -8));  // tie between codes 1 and 2 -> 2
  const FormatTraits& fp4 = Traits(ElemFormat::kFp4E2M1);
  EXPECT_EQ(fp4.decode_ref(0x1), 0.5f);
  EXPECT_EQ(fp4.round_ref(0.25f), 0.0f);  // underflow gives +0
  EXPECT_EQ(fp4.round_ref(0.26f), 0.5f);
  EXPECT_TRUE(std::signbit(fp4.round_ref(-0.1f)));
  const FormatTraits& e5m2 = Traits(ElemFormat::kFp8E5M2);
  EXPECT_EQ(e5m2.decode_ref(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(e5m2.decode_ref(0x7B), 57344.0f);
}

TEST(FormatTraitsTest, FastRoundingMatchesRefOnRandomAndDenseValues) {
  std::mt19937 rng(7);
  for (const FormatTraits* t : FloatRows()) {
    const GridConsts g = MakeGrid(*t);
    std::vector<float> values;
    std::uniform_real_distribution<float> mant(1.0f, 2.0f);
    std::uniform_int_distribution<int> exp(-30, 20);
    for (int i = 0; i < 50000; ++i) values.push_back((i % 2 ? -1.0f : 1.0f) * std::ldexp(mant(rng), exp(rng)));
    // Dense steps of a quarter quantum through the whole range hit every tie and near-tie.
    const float step = std::ldexp(1.0f, t->emin - t->mbits - 2);
    for (float v = 0.0f; v <= t->max * 1.1f; v += std::max(step, v * std::ldexp(1.0f, -t->mbits - 3))) {
      values.push_back(v);
    }
    for (float v : values) {
      ASSERT_TRUE(SameFloat(RoundToGrid(v, g), t->round_ref(v))) << t->name << " x=" << v;
      const float r = RoundToGrid(v, g);
      ASSERT_EQ(EncodeGridValue(r, g), t->encode_ref(v)) << t->name << " x=" << v;
    }
  }
}

TEST(FormatTraitsTest, IntegerRowsRoundHalfEvenAndClamp) {
  const FormatTraits& i4 = Traits(ElemFormat::kInt4);
  EXPECT_EQ(i4.round_ref(2.5f), 2.0f);
  EXPECT_EQ(i4.round_ref(3.5f), 4.0f);
  EXPECT_EQ(i4.round_ref(9.0f), 7.0f);
  EXPECT_EQ(i4.round_ref(-9.0f), -8.0f);
  EXPECT_EQ(i4.encode_ref(-1.0f), 0xF);
  EXPECT_EQ(i4.decode_ref(0xF), -1.0f);
  EXPECT_EQ(Traits(ElemFormat::kUInt4).decode_ref(0xF), 15.0f);
  for (int i = 0; i < kNumElemFormats; ++i) {
    const FormatTraits& t = AllTraits()[i];
    if (t.is_float) continue;
    for (int q = t.qmin; q <= t.qmax; ++q) EXPECT_EQ(t.decode_ref(t.encode_ref(static_cast<float>(q))), q) << t.name;
  }
}

}  // namespace
}  // namespace quark::kernels
