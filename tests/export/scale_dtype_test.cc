// The exported dtype of per-group int4/uint4 weight scales (F16/BF16, checkpoint-format.md) and the fake-quantized
// weight that uses exactly those scales, so that a reloaded export equals the fake-quantized model.
#include "core/export/scale_dtype.h"

#include <gtest/gtest.h>

#include "core/numerics/fake_quant.h"
#include "core/quantize/quant_linear.h"

namespace quark::exporter {
namespace {

QuantSpec Grouped(DType dtype, ScaleType scale_type = ScaleType::kFloat) {
  QuantSpec s;
  s.dtype = dtype;
  s.symmetric = dtype == DType::kInt4;
  s.qscheme = QScheme::kPerGroup;
  s.group_size = 32;
  s.scale_type = scale_type;
  return s;
}

TEST(ScaleDtypeTest, PerGroupInt4ScalesAreSixteenBit) {
  EXPECT_EQ(PackedGroupScaleDtype(Grouped(DType::kUInt4), at::kFloat), at::kHalf);
  EXPECT_EQ(PackedGroupScaleDtype(Grouped(DType::kInt4), at::kBFloat16), at::kBFloat16);
  EXPECT_EQ(PackedGroupScaleDtype(Grouped(DType::kInt4), at::kHalf), at::kHalf);
  EXPECT_EQ(PackedGroupScaleDtype(Grouped(DType::kInt4, ScaleType::kFloat32), at::kBFloat16), at::kHalf);
  EXPECT_EQ(PackedGroupScaleDtype(Grouped(DType::kInt4, ScaleType::kBFloat16), at::kFloat), at::kBFloat16);
  QuantSpec per_channel = Grouped(DType::kInt4);
  per_channel.qscheme = QScheme::kPerChannel;
  EXPECT_FALSE(PackedGroupScaleDtype(per_channel, at::kFloat).has_value());
  EXPECT_FALSE(PackedGroupScaleDtype(Grouped(DType::kInt8), at::kFloat).has_value());
}

TEST(ScaleDtypeTest, WeightSpecRoundsOnlyWhereTheExportWould) {
  EXPECT_EQ(WeightSpecForExport(Grouped(DType::kUInt4), at::kFloat).scale_type, ScaleType::kFloat16);
  EXPECT_EQ(WeightSpecForExport(Grouped(DType::kUInt4), at::kBFloat16), Grouped(DType::kUInt4));
  EXPECT_EQ(WeightSpecForExport(Grouped(DType::kInt8), at::kFloat), Grouped(DType::kInt8));
}

TEST(ScaleDtypeTest, FakeQuantizedWeightUsesTheExportedFloat16Scales) {
  torch::manual_seed(11);
  const QuantSpec spec = Grouped(DType::kUInt4);
  quantize::QuantLinearOptions o;
  o.name = "m";
  o.config.weight = spec;
  o.weight = at::randn({16, 64}) * at::logspace(-3, 1, 64).unsqueeze(0);  // scales over several binades
  auto q = quantize::QuantLinear::Create(o);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_TRUE((*q)->Freeze().ok());
  auto real = (*q)->ExportWeight();
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->scale.scalar_type(), at::kHalf);
  // What a reload does: widen the stored float16 scale to the model's float32 and dequantize the codes.
  RealQuantized reloaded = *real;
  reloaded.scale = real->scale.to(at::kFloat);
  auto back = Dequantize(reloaded, spec, at::kFloat);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(at::equal(*back, (*q)->weight()));
  // And the float32-scaled fake quantization differs: the rounding is real, not a no-op.
  auto f32 = ParamsOf(o.weight, spec, TensorRole::kWeight);
  ASSERT_TRUE(f32.ok());
  EXPECT_FALSE(at::equal(*FakeQuantize(o.weight, spec, *f32), (*q)->weight()));
}

}  // namespace
}  // namespace quark::exporter
