// FP8 with 128x128 weight blocks and dynamic per-token-group-of-128 activations (the fp8_block preset): the block
// scales and values against a scalar reference written from the rule (amax / 448 per tile, e4m3 round_ref), real
// quantization read back bit-equal, Quark's JSON spelling, and shapes the tiles do not divide refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/config/presets.h"
#include "core/config/quark_json.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/quant_layout.h"
#include "core/numerics/real_quant.h"
#include "kernels/cpu/format_traits.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::RandomTensor;

const Config& Fp8Block() {
  static const Config config = *PresetConfig("fp8_block");
  return config;
}
const QuantSpec& WeightSpec() { return *Fp8Block().global_quant_config.weight; }
const QuantSpec& InputSpec() { return *Fp8Block().global_quant_config.input_tensors; }

// y = round_e4m3(clamp(x / s, +-448)) * s with s = amax / 448 over each [br, bc] tile (eps for a zero tile).
at::Tensor TileRef(const at::Tensor& x, int64_t br, int64_t bc) {
  const auto& e4m3 = kernels::Traits(kernels::ElemFormat::kFp8E4M3);
  at::Tensor y = at::empty_like(x);
  auto xa = x.accessor<float, 2>();
  auto ya = y.accessor<float, 2>();
  for (int64_t r0 = 0; r0 < x.size(0); r0 += br) {
    for (int64_t c0 = 0; c0 < x.size(1); c0 += bc) {
      float amax = 0.0f;
      for (int64_t r = r0; r < r0 + br; ++r) {
        for (int64_t c = c0; c < c0 + bc; ++c) amax = std::max(amax, std::fabs(xa[r][c]));
      }
      float s = amax / 448.0f;
      if (s == 0.0f) s = std::numeric_limits<float>::epsilon();
      for (int64_t r = r0; r < r0 + br; ++r) {
        for (int64_t c = c0; c < c0 + bc; ++c) ya[r][c] = e4m3.round_ref(std::clamp(xa[r][c] / s, -448.0f, 448.0f)) * s;
      }
    }
  }
  return y;
}

TEST(Fp8BlockTest, WeightBlocksMatchTheScalarReference) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{128, 128}, {256, 384}, {384, 1152}}) {
    at::Tensor w = RandomTensor({rows, cols}, rows + cols);
    w[0][5] = 900.0f;                                      // one large tile
    if (cols > 128) w.narrow(0, 0, 128).narrow(1, 128, 128).zero_();  // a zero tile
    auto params = ParamsOf(w, WeightSpec(), TensorRole::kWeight);
    ASSERT_TRUE(params.ok()) << params.status();
    EXPECT_EQ(params->scale.sizes().vec(), (std::vector<int64_t>{rows / 128, cols / 128}));
    EXPECT_EQ(params->scale[0][0].item<float>(), 900.0f / 448.0f);
    auto y = FakeQuantize(w, WeightSpec(), *params);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_TRUE(BitEqual(*y, TileRef(w, 128, 128))) << rows << "x" << cols;
    auto q = QuantizeReal(w, WeightSpec(), *params);
    ASSERT_TRUE(q.ok()) << q.status();
    auto back = Dequantize(*q, WeightSpec(), at::kFloat);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(BitEqual(*back, *y));
  }
}

TEST(Fp8BlockTest, ActivationsArePerTokenGroupOf128) {
  const at::Tensor x = RandomTensor({17, 384}, 9);
  auto y = FakeQuantizeDynamic(x, InputSpec(), TensorRole::kActivation);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(BitEqual(*y, TileRef(x, 1, 128)));
}

TEST(Fp8BlockTest, RefusesWeightsTheTilesDoNotDivide) {
  for (auto shape : {std::vector<int64_t>{130, 256}, std::vector<int64_t>{128, 200}}) {
    auto p = ParamsOf(at::ones(shape), WeightSpec(), TensorRole::kWeight);
    ASSERT_FALSE(p.ok());
    const std::string m(p.status().message());
    EXPECT_NE(m.find("block_size"), std::string::npos) << m;
    EXPECT_NE(m.find(ShapeString(shape)), std::string::npos) << m;
    EXPECT_NE(m.find("in_features % 128 == 0"), std::string::npos) << m;
  }
}

TEST(Fp8BlockTest, QuarkJsonSpellsPerBlockWithBlockSize) {
  const auto j = ConfigToQuarkJson(Fp8Block());
  const auto& w = j["global_quant_config"]["weight"];
  EXPECT_EQ(w["qscheme"], "per_block");
  EXPECT_EQ(w["block_size"], nlohmann::ordered_json({128, 128}));
  EXPECT_EQ(w["observer_cls"], "PerBlock2DMinMaxObserver");
  EXPECT_EQ(j["global_quant_config"]["input_tensors"]["group_size"], 128);
  auto back = ConfigFromQuarkJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Fp8Block());
  auto bad = j;
  bad["global_quant_config"]["weight"]["block_size"] = {128};
  auto refused = ConfigFromQuarkJson(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("global_quant_config.weight.block_size"), std::string::npos);
}

}  // namespace
}  // namespace quark
