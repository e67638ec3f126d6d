// #30 W4A8 (Quark's int4_fp8 ProgressiveSpec): fp8_e4m3 per tensor, then int4 per output channel on the fp8 values.
// The fake-quantized weight against a scalar reference written from the formula (formats-2026.md 1.7, Quark's
// SequentialQuantize: both stages quantized forward, dequantized in reverse in float32) on odd shapes and every model
// dtype; real quantization read back bit-equal; the calibrating quantizer gives the same parameters; Quark's JSON
// spelling and the refusals of chains the numerics do not run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/config/presets.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/quant_layout.h"
#include "core/numerics/real_quant.h"
#include "core/numerics/tensor_quantizer.h"
#include "kernels/cpu/format_traits.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::RandomTensor;

const Config& Int4Fp8() {
  static const Config config = *PresetConfig("int4_fp8");
  return config;
}
const QuantSpec& WeightSpec() { return *Int4Fp8().global_quant_config.weight; }

struct Ref {
  float s0 = 0.0f;
  std::vector<float> s1;
  at::Tensor y;  // in the model dtype
};

// The formula in scalar float32: s0 = amax / 448 (eps for 0); v = e4m3(clamp(x / s0)); s1 = max|v| / 7.5 per row
// (eps floor); q = int(clamp(rint(v * (1 / s1)), -8, 7)); y = (q * s1) * s0.
Ref Reference(const at::Tensor& w) {
  const auto& e4m3 = kernels::Traits(kernels::ElemFormat::kFp8E4M3);
  const float eps = std::numeric_limits<float>::epsilon();
  const at::Tensor x = w.to(at::kFloat).contiguous();
  auto xa = x.accessor<float, 2>();
  Ref r;
  float amax = 0.0f;
  for (int64_t i = 0; i < x.size(0); ++i) {
    for (int64_t j = 0; j < x.size(1); ++j) amax = std::max(amax, std::fabs(xa[i][j]));
  }
  r.s0 = amax / 448.0f;
  if (r.s0 == 0.0f) r.s0 = eps;
  at::Tensor y = at::empty(x.sizes(), at::kFloat);
  auto ya = y.accessor<float, 2>();
  for (int64_t i = 0; i < x.size(0); ++i) {
    std::vector<float> v(x.size(1));
    float m = 0.0f;
    for (int64_t j = 0; j < x.size(1); ++j) {
      v[j] = e4m3.round_ref(std::clamp(xa[i][j] / r.s0, -448.0f, 448.0f));
      m = std::max(m, std::fabs(v[j]));
    }
    const float s1 = std::max(m / 7.5f, eps);
    r.s1.push_back(s1);
    const float inv = 1.0f / s1;
    for (int64_t j = 0; j < x.size(1); ++j) {
      // Integer codes, as Quark's real quantization returns them (a -0.0 becomes 0).
      const float q = static_cast<float>(static_cast<int>(std::clamp(std::nearbyint(v[j] * inv), -8.0f, 7.0f)));
      ya[i][j] = (q * s1) * r.s0;
    }
  }
  r.y = y.to(w.scalar_type());
  return r;
}

at::Tensor OddWeight(int64_t rows, int64_t cols, uint64_t seed, at::ScalarType dtype) {
  at::Tensor w = RandomTensor({rows, cols}, seed);
  w[0][0] = 37.0f;                               // an outlier sets the fp8 scale
  if (rows > 2) w[rows / 2].mul_(1e-3f);         // a row far below it: its int4 scale comes from tiny fp8 values
  if (rows > 3) w[rows - 1].zero_();             // a zero row: eps scale
  return w.to(dtype);
}

TEST(ProgressiveTest, FakeQuantizeIsTheReferenceFormulaBitForBit) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {17, 16}, {5, 1025}, {33, 17}}) {
      const at::Tensor w = OddWeight(rows, cols, rows * 31 + cols, dtype);
      const Ref ref = Reference(w);
      auto params = ParamsOf(w, WeightSpec(), TensorRole::kWeight);
      ASSERT_TRUE(params.ok()) << params.status();
      EXPECT_EQ(params->global_scale.item<float>(), ref.s0) << rows << "x" << cols;
      ASSERT_EQ(params->scale.numel(), rows);
      for (int64_t i = 0; i < rows; ++i) EXPECT_EQ(params->scale[i].item<float>(), ref.s1[i]) << "row " << i;
      auto y = FakeQuantize(w, WeightSpec(), *params);
      ASSERT_TRUE(y.ok()) << y.status();
      EXPECT_TRUE(BitEqual(*y, ref.y)) << c10::toString(dtype) << " " << rows << "x" << cols;
      auto q = QuantizeReal(w, WeightSpec(), *params);
      ASSERT_TRUE(q.ok()) << q.status();
      EXPECT_GE(q->codes.min().item<int>(), -8);
      EXPECT_LE(q->codes.max().item<int>(), 7);
      auto back = Dequantize(*q, WeightSpec(), dtype);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(BitEqual(*back, *y));
    }
  }
}

TEST(ProgressiveTest, AnAllZeroWeightUsesEpsScales) {
  const at::Tensor w = at::zeros({3, 8});
  const Ref ref = Reference(w);
  auto y = FakeQuantizeDynamic(w, WeightSpec(), TensorRole::kWeight);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(BitEqual(*y, ref.y));
  EXPECT_EQ(ref.s0, std::numeric_limits<float>::epsilon());
}

TEST(ProgressiveTest, TheCalibratingQuantizerFreezesBothStages) {
  const at::Tensor w = OddWeight(9, 40, 5, at::kBFloat16);
  auto q = TensorQuantizer::Create(WeightSpec(), TensorRole::kWeight);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_TRUE((*q)->Observe(w).ok());
  ASSERT_TRUE((*q)->Freeze().ok());
  const Ref ref = Reference(w);
  ASSERT_NE((*q)->params(), nullptr);
  EXPECT_EQ((*q)->params()->global_scale.item<float>(), ref.s0);
  auto y = (*q)->FakeQuantize(w);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(BitEqual(*y, ref.y));
  auto exported = (*q)->Export(w);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->global_scale.item<float>(), ref.s0);
  EXPECT_EQ(exported->scale.sizes().vec(), std::vector<int64_t>{9});
}

TEST(ProgressiveTest, MissingFirstStageScaleIsNamed) {
  const at::Tensor w = RandomTensor({4, 8}, 1);
  auto params = ParamsOf(w, WeightSpec(), TensorRole::kWeight);
  ASSERT_TRUE(params.ok());
  params->global_scale = at::Tensor();
  auto y = FakeQuantize(w, WeightSpec(), *params);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(std::string(y.status().message()).find("global_scale"), std::string::npos) << y.status();
}

TEST(ProgressiveTest, QuarkJsonIsTheTwoElementProgressiveList) {
  const auto j = ConfigToQuarkJson(Int4Fp8());
  const auto& w = j["global_quant_config"]["weight"];
  ASSERT_TRUE(w.is_array());
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0]["dtype"], "fp8_e4m3");
  EXPECT_EQ(w[0]["qscheme"], "per_tensor");
  EXPECT_EQ(w[0]["is_dynamic"], false);
  EXPECT_EQ(w[0]["scale_type"], "float32");
  EXPECT_EQ(w[1]["dtype"], "int4");
  EXPECT_EQ(w[1]["qscheme"], "per_channel");
  EXPECT_EQ(w[1]["ch_axis"], 0);
  EXPECT_EQ(w[1]["symmetric"], true);
  EXPECT_EQ(w[1]["is_scale_quant"], false);
  const auto& in = j["global_quant_config"]["input_tensors"];
  EXPECT_EQ(in["dtype"], "fp8_e4m3");
  EXPECT_EQ(in["is_dynamic"], true);
  auto back = ConfigFromQuarkJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->global_quant_config, Int4Fp8().global_quant_config);
}

TEST(ProgressiveTest, BadProgressiveSpecsAreNamed) {
  auto j = ConfigToQuarkJson(Int4Fp8());
  j["global_quant_config"]["weight"][0]["is_dynamic"] = true;
  auto dynamic_first = ConfigFromQuarkJson(j);
  ASSERT_FALSE(dynamic_first.ok());
  EXPECT_NE(std::string(dynamic_first.status().message()).find("weight[0].is_dynamic"), std::string::npos)
      << dynamic_first.status();

  Config c = Int4Fp8();
  c.global_quant_config.weight->qscheme = QScheme::kPerGroup;
  c.global_quant_config.weight->group_size = 128;
  const absl::Status grouped = ValidationStatus(ValidateConfig(c));
  EXPECT_NE(std::string(grouped.message()).find("global_quant_config.weight.qscheme"), std::string::npos) << grouped;

  c = Int4Fp8();
  c.global_quant_config.input_tensors->fp8_first_stage = true;
  const absl::Status input = ValidationStatus(ValidateConfig(c));
  EXPECT_NE(std::string(input.message()).find("input_tensors.fp8_first_stage"), std::string::npos) << input;

  QuantSpec uint4 = WeightSpec();
  uint4.dtype = DType::kUInt4;
  EXPECT_FALSE(TensorQuantizer::Create(uint4, TensorRole::kWeight).ok());
}

}  // namespace
}  // namespace quark
