// TensorQuantizer: calibration, freezing, dynamic specs, export.
#include <gtest/gtest.h>

#include "core/numerics/fake_quant.h"
#include "core/numerics/tensor_quantizer.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::RandomTensor;
using testing::Spec;

TEST(TensorQuantizerTest, StaticActivationCalibratesThenFreezes) {
  auto q = TensorQuantizer::Create(Spec(DType::kInt8), TensorRole::kActivation);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE((*q)->NeedsCalibration());
  const at::Tensor a = RandomTensor({4, 8}, 1);
  const at::Tensor b = RandomTensor({2, 8}, 2) * 4;
  EXPECT_EQ((*q)->FakeQuantize(a).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*q)->Observe(a).ok());
  ASSERT_TRUE((*q)->Observe(b).ok());
  ASSERT_TRUE((*q)->Freeze().ok());
  EXPECT_TRUE((*q)->frozen());
  EXPECT_FALSE((*q)->Observe(a).ok());
  const float amax = std::max(a.abs().max().item<float>(), b.abs().max().item<float>());
  EXPECT_FLOAT_EQ((*q)->params()->scale.item<float>(), amax / 127.5f);
  auto y = (*q)->FakeQuantize(a);
  ASSERT_TRUE(y.ok());
  EXPECT_TRUE(BitEqual(*y, *FakeQuantize(a, Spec(DType::kInt8), *(*q)->params(), TensorRole::kActivation)));
  auto e = (*q)->Export(a);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->codes.scalar_type(), at::kChar);
}

TEST(TensorQuantizerTest, DynamicPerTokenNeedsNoCalibration) {
  QuantSpec spec = Spec(DType::kFp8E4M3, QScheme::kPerChannel);
  spec.is_dynamic = true;
  auto q = TensorQuantizer::Create(spec, TensorRole::kActivation);
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE((*q)->NeedsCalibration());
  const at::Tensor x = RandomTensor({2, 3, 16}, 5, at::kBFloat16);
  auto y = (*q)->FakeQuantize(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(BitEqual(*y, *FakeQuantizeDynamic(x, spec, TensorRole::kActivation)));
}

TEST(TensorQuantizerTest, WeightPerGroupExport) {
  QuantSpec spec = Spec(DType::kUInt4, QScheme::kPerGroup, false);
  spec.group_size = 16;
  auto q = TensorQuantizer::Create(spec, TensorRole::kWeight);
  const at::Tensor w = RandomTensor({8, 64}, 7);
  ASSERT_TRUE((*q)->Observe(w).ok());
  ASSERT_TRUE((*q)->Freeze().ok());
  auto e = (*q)->Export(w);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->scale.sizes(), (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(e->codes.scalar_type(), at::kByte);
}

TEST(TensorQuantizerTest, InvalidSpecNamesTheField) {
  QuantSpec spec = Spec(DType::kInt4);
  spec.scale_type = ScaleType::kPof2;
  EXPECT_EQ(TensorQuantizer::Create(spec, TensorRole::kWeight).status().message(),
            "scale_type: pof2 is supported for int8 and uint8 only, not int4");
}

}  // namespace
}  // namespace quark
