// NVFP4 (fp4 groups of 16, float8_e4m3fn block scales, float32 global scale): fast kernels against the scalar Ref
// bit for bit on odd sizes and special values, golden scales, real quantization read back equal to the fake
// quantization, the dynamic input's calibrated global scale, and the K % 16 rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/config/presets.h"
#include "core/config/quark_json.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/real_quant.h"
#include "core/numerics/tensor_quantizer.h"
#include "kernels/cpu/nvfp4_kernels.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::RandomTensor;

// The presets' specs: the static weight's, or the dynamic input's.
QuantSpec Nvfp4Spec(bool dynamic = false) {
  const Config config = *PresetConfig("nvfp4");
  return dynamic ? *config.global_quant_config.input_tensors : *config.global_quant_config.weight;
}

// Random rows with outliers, a zero group, tiny values (block scales underflowing e4m3), NaN and +-Inf.
at::Tensor Awkward(int64_t rows, int64_t len, uint64_t seed) {
  at::Tensor x = RandomTensor({rows, len}, seed);
  float* p = x.data_ptr<float>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; i += 37) p[i] *= 50.0f;
  if (len >= 32) {
    for (int64_t i = 16; i < 32; ++i) p[i] = 0.0f;  // a zero group in row 0
  }
  if (n > 64) {
    for (int64_t i = 48; i < 64 && i < n; ++i) p[i] *= 1e-6f;  // scales below e4m3's smallest subnormal
  }
  if (rows > 2) p[2 * len + 3] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

at::Tensor RefOf(const at::Tensor& x, float global = 0.0f) {
  at::Tensor y = at::empty_like(x);
  kernels::Nvfp4FakeQuantRef(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), global);
  return y;
}

TEST(Nvfp4Test, FakeQuantizeMatchesScalarRefOnOddSizes) {
  for (int64_t rows : {1, 3, 17}) {
    for (int64_t len : {16, 1040, 5136}) {
      const at::Tensor x = Awkward(rows, len, 7 * rows + len);
      auto y = FakeQuantizeDynamic(x, Nvfp4Spec(), TensorRole::kWeight);
      ASSERT_TRUE(y.ok()) << y.status();
      EXPECT_TRUE(BitEqual(*y, RefOf(x))) << rows << "x" << len;
    }
  }
}

TEST(Nvfp4Test, InfinityGivesGlobalScaleOneAndSaturates) {
  at::Tensor x = RandomTensor({2, 32}, 3);
  x[1][5] = std::numeric_limits<float>::infinity();
  auto y = FakeQuantizeDynamic(x, Nvfp4Spec(), TensorRole::kWeight);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(BitEqual(*y, RefOf(x)));
  EXPECT_EQ((*y)[1][5].item<float>(), 6.0f * 448.0f);  // 6 * e4m3 448 * global 1
}

TEST(Nvfp4Test, GoldenScales) {
  // amax 6: global 6 / 2688; the block holding 6 gets e4m3 448 (0x7E); an all-zero block gets 1.0 (0x38).
  at::Tensor x = at::zeros({1, 32});
  x[0][0] = 6.0f;
  x[0][1] = -1.0f;
  auto params = ParamsOf(x, Nvfp4Spec(), TensorRole::kWeight);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->global_scale.item<float>(), 6.0f / 2688.0f);
  auto q = QuantizeReal(x, Nvfp4Spec(), *params);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->scale[0][0].item<uint8_t>(), 0x7E);
  EXPECT_EQ(q->scale[0][1].item<uint8_t>(), 0x38);
  EXPECT_EQ(q->codes[0][0].item<uint8_t>(), 0x7);  // +6
  EXPECT_EQ(q->codes[0][1].item<uint8_t>(), 0xA);  // -1: sign 8 | index 2
}

TEST(Nvfp4Test, RealQuantizationReadsBackAsTheFakeQuantization) {
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    // Finite values: fp4 has no NaN code (a NaN element is written as +0, as for every fp4 / fp6 format).
    const at::Tensor x = at::nan_to_num(Awkward(17, 1040, 11), 0.0).to(dtype);
    auto params = ParamsOf(x, Nvfp4Spec(), TensorRole::kWeight);
    ASSERT_TRUE(params.ok()) << params.status();
    auto fake = FakeQuantize(x, Nvfp4Spec(), *params);
    auto q = QuantizeReal(x, Nvfp4Spec(), *params);
    ASSERT_TRUE(fake.ok() && q.ok());
    auto back = Dequantize(*q, Nvfp4Spec(), dtype);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(BitEqual(*back, *fake)) << c10::toString(dtype);
  }
}

TEST(Nvfp4Test, DynamicInputUsesTheCalibratedGlobalScale) {
  auto q = TensorQuantizer::Create(Nvfp4Spec(/*dynamic=*/true), TensorRole::kActivation);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE((*q)->NeedsCalibration());
  at::Tensor calib = RandomTensor({5, 48}, 1);
  calib[2][7] = -10.0f;
  ASSERT_TRUE((*q)->Observe(calib).ok());
  ASSERT_TRUE((*q)->Freeze().ok());
  ASSERT_NE((*q)->params(), nullptr);
  EXPECT_EQ((*q)->params()->global_scale.item<float>(), 10.0f / 2688.0f);
  const at::Tensor x = Awkward(3, 48, 5) * 0.5;
  auto y = (*q)->FakeQuantize(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(BitEqual(*y, RefOf(x, 10.0f / 2688.0f)));
}

TEST(Nvfp4Test, RefusesAShapeWhoseLastDimensionIsNotAMultipleOf16) {
  auto y = FakeQuantizeDynamic(at::ones({3, 40}), Nvfp4Spec(), TensorRole::kWeight);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("K % 16 == 0"), std::string::npos) << y.status();
  EXPECT_NE(y.status().message().find("[3, 40]"), std::string::npos) << y.status();
}

TEST(Nvfp4Test, PresetsWriteQuarksTwoElementListsAndReadThemBack) {
  for (const char* name : {"nvfp4", "nvfp4_weight_only"}) {
    auto config = PresetConfig(name);
    ASSERT_TRUE(config.ok()) << config.status();
    const auto j = ConfigToQuarkJson(*config);
    const auto& w = j["global_quant_config"]["weight"];
    ASSERT_TRUE(w.is_array() && w.size() == 2) << w.dump();
    EXPECT_EQ(w[0]["dtype"], "fp4");
    EXPECT_EQ(w[0]["group_size"], 16);
    EXPECT_EQ(w[1]["dtype"], "fp8_e4m3");
    EXPECT_EQ(w[1]["is_scale_quant"], true);
    const auto& in = j["global_quant_config"]["input_tensors"];
    if (std::string(name) == "nvfp4") {
      ASSERT_TRUE(in.is_array() && in.size() == 2);
      EXPECT_EQ(in[0]["is_dynamic"], true);
      EXPECT_EQ(in[1]["is_dynamic"], false);
    } else {
      EXPECT_TRUE(in.is_null());
    }
    auto back = ConfigFromQuarkJson(j);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, *config) << name;
  }
}

TEST(Nvfp4Test, OtherTwoElementListsAreRefusedNamingTheField) {
  auto j = ConfigToQuarkJson(*PresetConfig("nvfp4"));
  j["global_quant_config"]["weight"][1]["dtype"] = "int4";
  auto c = ConfigFromQuarkJson(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("global_quant_config.weight"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace quark
