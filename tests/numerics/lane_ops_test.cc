// The AVX2 and baseline builds of the lane loops agree bit for bit (ties, -0, NaN, saturation, subnormals).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/lane_table.h"

namespace quark::kernels {
namespace {

std::vector<float> Inputs() {
  std::vector<float> v = {0.0f, -0.0f, 0.5f, -0.5f, 1.5f, -2.5f, 127.5f, -128.5f, 1e30f, -1e30f, NAN, INFINITY,
                          -INFINITY, 1e-40f, -1e-42f, 0.49999997f, 2.5000002f};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-300.0f, 300.0f);
  for (int i = 0; i < 2000; ++i) v.push_back(i % 3 ? u(rng) : std::nearbyint(u(rng) * 2) / 2);  // many ties
  return v;
}

bool Same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(LaneOpsTest, Avx2AndBaselineAgree) {
  const LaneTable* fast = Avx2LaneTable();
  if (fast == nullptr) GTEST_SKIP() << "AVX2 lanes not compiled on this architecture";
  const LaneTable& base = BaseLaneTable();
  const std::vector<float> in = Inputs();
  const auto n = static_cast<int64_t>(in.size());
  std::vector<float> s(n, 0.75f), inv(n, 1.0f / 0.75f), z(n, 3.0f);
  for (int mode = 0; mode < 3; ++mode) {
    for (int fz = 0; fz < 2; ++fz) {
      std::vector<float> a = in, b = in;
      fast->affine_run[mode][fz](a.data(), n, 0.75f, 1.0f / 0.75f, fz ? 2.5f : 3.0f, -128.0f, 127.0f);
      base.affine_run[mode][fz](b.data(), n, 0.75f, 1.0f / 0.75f, fz ? 2.5f : 3.0f, -128.0f, 127.0f);
      EXPECT_TRUE(Same(a, b)) << "affine_run mode " << mode << " fz " << fz;
      a = in;
      b = in;
      fast->affine_cols[mode][fz](a.data(), n, s.data(), inv.data(), z.data(), 0.0f, 15.0f);
      base.affine_cols[mode][fz](b.data(), n, s.data(), inv.data(), z.data(), 0.0f, 15.0f);
      EXPECT_TRUE(Same(a, b)) << "affine_cols mode " << mode;
      a = in;
      b = in;
      fast->affine_groups[mode][fz](a.data(), n, 7, s.data(), inv.data(), z.data(), -8.0f, 7.0f);
      base.affine_groups[mode][fz](b.data(), n, 7, s.data(), inv.data(), z.data(), -8.0f, 7.0f);
      EXPECT_TRUE(Same(a, b)) << "affine_groups mode " << mode;
    }
  }
  for (GridArgs g : {GridArgs{3, -6, 448.0f}, GridArgs{2, -14, 57344.0f}, GridArgs{1, 0, 6.0f}}) {
    std::vector<float> a = in, b = in;
    fast->float_run(a.data(), n, 0.37f, g);
    base.float_run(b.data(), n, 0.37f, g);
    EXPECT_TRUE(Same(a, b)) << "float_run max " << g.max;
    a = in;
    b = in;
    fast->float_groups(a.data(), n, 5, s.data(), g);
    base.float_groups(b.data(), n, 5, s.data(), g);
    EXPECT_TRUE(Same(a, b)) << "float_groups max " << g.max;
    std::vector<float> bi((n + 31) / 32, 0.25f), bs((n + 31) / 32, 4.0f);
    a = in;
    b = in;
    fast->mx_grid(a.data(), n, bi.data(), bs.data(), g);
    base.mx_grid(b.data(), n, bi.data(), bs.data(), g);
    EXPECT_TRUE(Same(a, b)) << "mx_grid max " << g.max;
    for (int mode = 0; mode < 3; ++mode) {
      a = in;
      b = in;
      fast->mx_int[mode](a.data(), n, bi.data(), bs.data());
      base.mx_int[mode](b.data(), n, bi.data(), bs.data());
      EXPECT_TRUE(Same(a, b)) << "mx_int mode " << mode;
    }
  }
  std::vector<uint16_t> ha(n), hb(n);
  fast->store_bf16(in.data(), ha.data(), n);
  base.store_bf16(in.data(), hb.data(), n);
  EXPECT_EQ(ha, hb);
  fast->store_f16(in.data(), ha.data(), n);
  base.store_f16(in.data(), hb.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isnan(in[i])) EXPECT_EQ(ha[i], hb[i]) << "f16 of " << in[i];
  }
  std::vector<float> fa(n), fb(n);
  fast->load_f16(hb.data(), fa.data(), n);
  base.load_f16(hb.data(), fb.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isnan(fb[i])) EXPECT_EQ(fa[i], fb[i]);
  }
}

}  // namespace
}  // namespace quark::kernels
