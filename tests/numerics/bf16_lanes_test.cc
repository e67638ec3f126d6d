// The hand-written AVX2 bfloat16 loops (kernels/cpu/bf16_lanes_avx2.cc) give the same bits as the generic fused
// loops of the baseline table (which LaneOpsTest.FusedBf16LoopsEqualTheBufferedOnes ties to the float32 loops):
// on every bfloat16 bit pattern, for every rounding mode and zero-point kind, for regular and degenerate
// parameters, for every group layout the loops treat differently, and for every tail length.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/lane_table.h"

namespace quark::kernels {
namespace {

using Bits16 = std::vector<uint16_t>;

// Every bfloat16 bit pattern (NaNs of both signs and any payload, infinities, subnormals, -0), in a shuffled order
// so that each vector mixes them.
Bits16 EveryBf16() {
  Bits16 x(65536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(i);
  std::shuffle(x.begin(), x.end(), std::mt19937(11));
  return x;
}

// Scales: plain, with inexact reciprocals, tiny (x / s overflows), huge, subnormal (6e-39, whose reciprocal is still
// finite), and one that puts many products exactly halfway between two bfloat16 values (1 + 2^-8).
const std::vector<float> kScales = {0.75f, 0.37f, 3.1e-3f, 1e-30f, 1e30f, 6e-39f, 1.00390625f};

// The hand-written loops, where they were compiled and this CPU runs them.
const Bf16LaneTable* HandWritten() {
  const LaneTable* t = Avx2LaneTable();
  return t == nullptr || &LaneOpsForThisCpu() != t ? nullptr : &t->bf16;
}

// Runs `loop` of both tables on x (out of place, and in place for the hand-written one) and compares the bits.
template <typename Loop>
void ExpectSame(const std::string& what, const Bits16& x, Loop loop) {
  const Bf16LaneTable& generic = BaseLaneTable().bf16;
  const Bf16LaneTable& fast = *HandWritten();
  Bits16 want(x.size()), got(x.size());
  loop(generic, x.data(), want.data(), static_cast<int64_t>(x.size()));
  loop(fast, x.data(), got.data(), static_cast<int64_t>(x.size()));
  size_t first_bad = 0;
  while (first_bad < x.size() && want[first_bad] == got[first_bad]) ++first_bad;
  ASSERT_EQ(first_bad, x.size()) << what << ": input 0x" << std::hex << x[first_bad] << " gives 0x" << got[first_bad]
                                 << ", the generic loop 0x" << want[first_bad];
  Bits16 inplace = x;
  loop(fast, inplace.data(), inplace.data(), static_cast<int64_t>(x.size()));
  ASSERT_EQ(inplace, want) << what << " in place";
}

class Bf16LanesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (HandWritten() == nullptr) GTEST_SKIP() << "AVX2 lanes not compiled here, or not run by this CPU";
  }
};

TEST_F(Bf16LanesTest, AffineRunsOnEveryInput) {
  const Bits16 x = EveryBf16();
  for (int mode = 0; mode < 3; ++mode) {
    for (int fz = 0; fz < 2; ++fz) {
      for (float s : kScales) {
        for (float z : {0.0f, -0.0f, 3.0f, -2.5f}) {
          for (const auto range : {std::pair{-128.0f, 127.0f}, std::pair{0.0f, 15.0f}}) {
            const float qmin = range.first, qmax = range.second;  // (a lambda may not capture structured bindings)
            ExpectSame("affine_run mode " + std::to_string(mode) + " fz " + std::to_string(fz) + " s " +
                           std::to_string(s) + " z " + std::to_string(z),
                       x, [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t n) {
                         t.affine_run[mode][fz](in, out, n, s, 1.0f / s, z, qmin, qmax);
                       });
          }
        }
      }
    }
  }
}

// Degenerate parameters take the generic loop: an infinite or NaN scale, a zero reciprocal, a NaN zero point, zero
// points so large that the generic rounding trick is inexact (with a reciprocal other than 1 / s), infinite ranges.
TEST_F(Bf16LanesTest, AffineRunsWithDegenerateParameters) {
  const Bits16 x = EveryBf16();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Params {
    float s, inv, z, qmin = -128.0f, qmax = 127.0f;
  };
  const float inv_near_one = 1.00000024f;  // 1 + 2^-22
  for (const Params p : {Params{inf, 0.0f, 0.0f}, Params{0.0f, inf, 0.0f}, Params{1.0f, 1.0f, nan},
                         Params{nan, nan, 1.0f}, Params{-0.5f, -2.0f, 0.0f}, Params{1.00390625f, inv_near_one, -4194304.0f},
                         Params{1.0f, inv_near_one, 8388608.0f}, Params{0.0f, 1.0f, 0.0f, -128.0f, inf}}) {
    for (int mode = 0; mode < 3; ++mode) {
      for (int fz = 0; fz < 2; ++fz) {
        ExpectSame("affine_run degenerate s " + std::to_string(p.s) + " inv " + std::to_string(p.inv) + " z " +
                       std::to_string(p.z) + " qmax " + std::to_string(p.qmax),
                   x, [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t n) {
                     t.affine_run[mode][fz](in, out, n, p.s, p.inv, p.z, p.qmin, p.qmax);
                   });
      }
    }
  }
}

// Group sizes the loops treat differently: shorter than a vector, not a multiple of one, multiples of one; with
// all zero points +0 and mixed; one group with a degenerate scale sends the whole call to the generic loop.
TEST_F(Bf16LanesTest, AffineGroupsOnEveryInput) {
  const Bits16 x = EveryBf16();
  for (int64_t g : {5, 16, 24, 32, 128}) {
    const int64_t groups = (static_cast<int64_t>(x.size()) + g - 1) / g;
    for (int variant = 0; variant < 3; ++variant) {
      std::vector<float> s(groups), inv(groups), z(groups);
      for (int64_t k = 0; k < groups; ++k) {
        s[k] = kScales[k % kScales.size()];
        inv[k] = 1.0f / s[k];
        z[k] = variant == 0 ? 0.0f : static_cast<float>(k % 5);
      }
      if (variant == 2) s[groups / 2] = std::numeric_limits<float>::infinity();
      for (int mode = 0; mode < 3; ++mode) {
        for (int fz = 0; fz < 2; ++fz) {
          ExpectSame("affine_groups g " + std::to_string(g) + " variant " + std::to_string(variant) + " mode " +
                         std::to_string(mode) + " fz " + std::to_string(fz),
                     x, [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t n) {
                       t.affine_groups[mode][fz](in, out, n, g, s.data(), inv.data(), z.data(), 0.0f, 15.0f);
                     });
        }
      }
    }
  }
}

// The small float grids: fp8 e4m3 / e5m2, fp6 e3m2 / e2m3, fp4 e2m1; then grids that are not small float formats
// (they take the generic loop).
const std::vector<GridArgs> kGrids = {GridArgs{3, -6, 448.0f},  GridArgs{2, -14, 57344.0f}, GridArgs{2, -2, 28.0f},
                                      GridArgs{3, 0, 7.5f},     GridArgs{1, 0, 6.0f},       GridArgs{7, -126, 3e38f},
                                      GridArgs{23, -126, 1e30f}};

TEST_F(Bf16LanesTest, FloatGridsOnEveryInput) {
  const Bits16 x = EveryBf16();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> scales = kScales;
  for (float degenerate : {inf, 0.0f, -0.5f, std::numeric_limits<float>::quiet_NaN()}) scales.push_back(degenerate);
  for (const GridArgs& g : kGrids) {
    for (float s : scales) {
      ExpectSame("float_run max " + std::to_string(g.max) + " s " + std::to_string(s), x,
                 [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t n) {
                   t.float_run(in, out, n, s, g);
                 });
    }
    for (int64_t group : {5, 16, 24, 32}) {
      const int64_t groups = (static_cast<int64_t>(x.size()) + group - 1) / group;
      for (bool degenerate : {false, true}) {
        std::vector<float> s(groups);
        for (int64_t k = 0; k < groups; ++k) s[k] = kScales[k % kScales.size()];
        if (degenerate) s[1] = 0.0f;
        ExpectSame("float_groups max " + std::to_string(g.max) + " group " + std::to_string(group), x,
                   [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t n) {
                     t.float_groups(in, out, n, group, s.data(), g);
                   });
      }
    }
  }
}

// MX blocks with power-of-two multipliers from 2^-126 to 2^100 (and one irregular block), for the float grids and
// MXINT8 in every rounding mode; the block amax ignores NaN.
TEST_F(Bf16LanesTest, MxBlocksOnEveryInput) {
  const Bits16 x = EveryBf16();
  const int64_t blocks = (static_cast<int64_t>(x.size()) + 31) / 32;
  for (bool irregular : {false, true}) {
    std::vector<float> inv(blocks), s(blocks);
    for (int64_t b = 0; b < blocks; ++b) {
      const int e = static_cast<int>(b % 227) - 126;
      s[b] = std::ldexp(1.0f, e);
      inv[b] = std::ldexp(1.0f, -e);
    }
    if (irregular) inv[3] = std::numeric_limits<float>::infinity();
    const std::string suffix = irregular ? " (irregular block)" : "";
    for (const GridArgs& g : kGrids) {
      ExpectSame("mx_grid max " + std::to_string(g.max) + suffix, x,
                 [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t n) {
                   t.mx_grid(in, out, n, inv.data(), s.data(), g);
                 });
    }
    for (int mode = 0; mode < 3; ++mode) {
      ExpectSame("mx_int mode " + std::to_string(mode) + suffix, x,
                 [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t n) {
                   t.mx_int[mode](in, out, n, inv.data(), s.data());
                 });
    }
  }
  std::vector<float> want(blocks), got(blocks);
  BaseLaneTable().bf16.block_amax(x.data(), static_cast<int64_t>(x.size()), want.data());
  HandWritten()->block_amax(x.data(), static_cast<int64_t>(x.size()), got.data());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
}

// MXINT8 results have their input's sign, zeros included (a negative input that rounds to zero gives -0, as in
// AMD Quark), in the generic and the hand-written loops; a NaN input gives the quiet NaN.
TEST_F(Bf16LanesTest, MxIntKeepsTheInputSign) {
  const Bits16 x = EveryBf16();
  const int64_t blocks = (static_cast<int64_t>(x.size()) + 31) / 32;
  std::vector<float> inv(blocks), s(blocks);
  for (int64_t b = 0; b < blocks; ++b) {
    const int e = static_cast<int>(b % 227) - 126;
    s[b] = std::ldexp(1.0f, e);
    inv[b] = std::ldexp(1.0f, -e);
  }
  for (const Bf16LaneTable* t : {&BaseLaneTable().bf16, HandWritten()}) {
    for (int mode = 0; mode < 3; ++mode) {
      Bits16 y(x.size());
      t->mx_int[mode](x.data(), y.data(), static_cast<int64_t>(x.size()), inv.data(), s.data());
      for (size_t i = 0; i < x.size(); ++i) {
        if ((x[i] & 0x7FFF) > 0x7F80) {
          ASSERT_EQ(y[i], 0x7FC0) << "mode " << mode << " input 0x" << std::hex << x[i];
        } else {
          ASSERT_EQ(y[i] & 0x8000, x[i] & 0x8000) << "mode " << mode << " input 0x" << std::hex << x[i] << " gives 0x"
                                                 << y[i];
        }
      }
    }
  }
}

// Every length from 0 to 100 (tails of every size after whole vectors and blocks) for every loop.
TEST_F(Bf16LanesTest, EveryTailLength) {
  const Bits16 all = EveryBf16();
  std::vector<float> s(8, 0.37f), inv(8, 1.0f / 0.37f), z(8, 2.0f), mx_inv(8, 64.0f), mx_s(8, 1.0f / 64.0f);
  const GridArgs fp8{3, -6, 448.0f};
  for (int64_t n = 0; n <= 100; ++n) {
    const Bits16 x(all.begin() + 1000, all.begin() + 1000 + n);
    const std::string len = " n " + std::to_string(n);
    ExpectSame("affine_run" + len, x, [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t m) {
      t.affine_run[0][0](in, out, m, 0.37f, 1.0f / 0.37f, 0.0f, -128.0f, 127.0f);
    });
    ExpectSame("affine_groups" + len, x, [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t m) {
      t.affine_groups[0][0](in, out, m, 16, s.data(), inv.data(), z.data(), 0.0f, 15.0f);
    });
    ExpectSame("float_run" + len, x, [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t m) {
      t.float_run(in, out, m, 0.37f, fp8);
    });
    ExpectSame("float_groups" + len, x, [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t m) {
      t.float_groups(in, out, m, 32, s.data(), fp8);
    });
    ExpectSame("mx_grid" + len, x, [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t m) {
      t.mx_grid(in, out, m, mx_inv.data(), mx_s.data(), fp8);
    });
    ExpectSame("mx_int" + len, x, [&](const Bf16LaneTable& t, const uint16_t* in, uint16_t* out, int64_t m) {
      t.mx_int[1](in, out, m, mx_inv.data(), mx_s.data());
    });
    std::vector<float> want(4, -1.0f), got(4, -1.0f);
    BaseLaneTable().bf16.block_amax(x.data(), n, want.data());
    HandWritten()->block_amax(x.data(), n, got.data());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << "block_amax" << len;
  }
}

}  // namespace
}  // namespace quark::kernels
