// QuantLinear on bfloat16 inputs follows the runtime's bf16 matmul mode (core/runtime/matmul_precision.h): in f32
// mode the product of the (fake-quantized) weight is computed in float32 and rounded to bf16, in native mode it is
// LibTorch's bf16 product. Both phases (calibrating, frozen) are checked, since the float32 copy is per phase.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/numerics/fake_quant.h"
#include "core/quantize/quant_linear.h"
#include "core/runtime/matmul_precision.h"

namespace quark::quantize {
namespace {

QuantSpec Int8PerChannel() {
  QuantSpec s;
  s.dtype = DType::kInt8;
  s.qscheme = QScheme::kPerChannel;
  s.ch_axis = 0;
  return s;
}

bool BitEqual(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a, b);
}

class QuantLinearPrecisionTest : public ::testing::Test {
 protected:
  void TearDown() override { runtime::SetBf16MatmulForTest(std::nullopt); }

  std::shared_ptr<QuantLinear> Make() {
    QuantLinearOptions o;
    o.name = "model.layers.0.mlp.up_proj";
    o.config.weight = Int8PerChannel();
    o.weight = (at::randn({24, 40}, at::TensorOptions().dtype(at::kFloat)) * 0.1).to(at::kBFloat16);
    o.bias = (at::randn({24}) * 0.1).to(at::kBFloat16);
    weight_ = o.weight;
    bias_ = o.bias;
    return *QuantLinear::Create(o);
  }

  at::Tensor weight_, bias_;
  const at::Tensor x_ = (at::randn({3, 5, 40}) * 0.5).to(at::kBFloat16);
};

TEST_F(QuantLinearPrecisionTest, Float32ModeComputesInFloat32InBothPhases) {
  runtime::SetBf16MatmulForTest(runtime::Bf16Matmul::kFloat32);
  auto linear = Make();
  const at::Tensor calibrating = linear->forward(x_);
  EXPECT_EQ(calibrating.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(BitEqual(calibrating, at::linear(x_.to(at::kFloat), weight_.to(at::kFloat), bias_.to(at::kFloat))
                                        .to(at::kBFloat16)));
  ASSERT_TRUE(linear->Freeze().ok());
  const at::Tensor fq_weight = *FakeQuantizeDynamic(weight_, Int8PerChannel(), TensorRole::kWeight);
  ASSERT_FALSE(at::equal(fq_weight, weight_));  // the frozen forward must use a different weight
  const at::Tensor frozen = linear->forward(x_);
  EXPECT_TRUE(BitEqual(frozen, at::linear(x_.to(at::kFloat), fq_weight.to(at::kFloat), bias_.to(at::kFloat))
                                   .to(at::kBFloat16)));
}

TEST_F(QuantLinearPrecisionTest, NativeModeUsesTheBf16Product) {
  runtime::SetBf16MatmulForTest(runtime::Bf16Matmul::kNative);
  auto linear = Make();
  ASSERT_TRUE(linear->Freeze().ok());
  const at::Tensor fq_weight = *FakeQuantizeDynamic(weight_, Int8PerChannel(), TensorRole::kWeight);
  EXPECT_TRUE(BitEqual(linear->forward(x_), at::linear(x_, fq_weight, bias_)));
}

}  // namespace
}  // namespace quark::quantize
