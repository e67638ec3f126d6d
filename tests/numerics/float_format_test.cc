// fp8 / fp6 / fp4 with a float scale, and the bfloat16 / float16 casts.
#include <gtest/gtest.h>

#include <cmath>

#include "core/numerics/fake_quant.h"
#include "core/numerics/real_quant.h"
#include "kernels/cpu/format_traits.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::F32;
using testing::RandomTensor;
using testing::Spec;
using testing::ToVector;

TEST(FloatFormatTest, Fp8E4M3PerTensorGoldens) {
  // amax 896 -> s = 896 / 448 = 2. x / s: 448, 8.5 (tie -> 8), 9.5 (tie -> 10), 1.5 * 2^-9 (tie -> 2^-8), -1000 -> -448.
  const at::Tensor x = F32({896.0f, 17.0f, 19.0f, 2.0f * std::ldexp(1.5f, -9), -1000.0f});
  const QuantSpec spec = Spec(DType::kFp8E4M3);
  auto p = ComputeQuantParams(F32({-896.0f}).reshape({}), F32({896.0f}).reshape({}), spec);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->scale.item<float>(), 2.0f);
  auto y = FakeQuantize(x, spec, *p);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(ToVector(*y), (std::vector<float>{896.0f, 16.0f, 20.0f, 2.0f * std::ldexp(1.0f, -8), -896.0f}));
  auto q = QuantizeReal(x, spec, *p);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->codes.scalar_type(), at::kByte);
  EXPECT_EQ(q->codes[0].item<uint8_t>(), 0x7E);  // 448
  EXPECT_EQ(q->codes[4].item<uint8_t>(), 0xFE);  // -448
}

TEST(FloatFormatTest, ScaleFormulaPerFormat) {
  struct Case {
    DType dtype;
    float fmax;
  };
  for (const Case& c : {Case{DType::kFp8E4M3, 448.0f}, Case{DType::kFp8E5M2, 57344.0f}, Case{DType::kFp6E3M2, 28.0f},
                        Case{DType::kFp6E2M3, 7.5f}, Case{DType::kFp4, 6.0f}}) {
    auto p = ComputeQuantParams(F32({-3.0f}).reshape({}), F32({1.0f}).reshape({}), Spec(c.dtype));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->scale.item<float>(), 3.0f / c.fmax) << Name(c.dtype);
    auto zero = ComputeQuantParams(F32({0.0f}).reshape({}), F32({0.0f}).reshape({}), Spec(c.dtype));
    EXPECT_EQ(zero->scale.item<float>(), 1.1920929e-07f) << Name(c.dtype);
  }
}

TEST(FloatFormatTest, Fp4GridGolden) {
  // s = 1 (amax 6): grid 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  const at::Tensor x = F32({0.2f, 0.25f, 0.75f, 1.25f, 2.5f, 3.5f, 5.0f, 5.1f, -7.0f});
  auto p = ComputeQuantParams(F32({-6.0f}).reshape({}), F32({6.0f}).reshape({}), Spec(DType::kFp4));
  auto y = FakeQuantize(x, Spec(DType::kFp4), *p);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(ToVector(*y), (std::vector<float>{0.0f, 0.0f, 1.0f, 1.0f, 2.0f, 4.0f, 4.0f, 6.0f, -6.0f}));
}

TEST(FloatFormatTest, NanStaysNanInfSaturates) {
  auto p = ComputeQuantParams(F32({-448.0f}).reshape({}), F32({448.0f}).reshape({}), Spec(DType::kFp8E4M3));
  auto y = FakeQuantize(F32({NAN, INFINITY, -INFINITY}), Spec(DType::kFp8E4M3), *p);
  const std::vector<float> v = ToVector(*y);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 448.0f);
  EXPECT_EQ(v[2], -448.0f);
}

TEST(FloatFormatTest, RealEqualsFakeAndIdempotentForEveryFormat) {
  for (DType d : {DType::kFp8E4M3, DType::kFp8E5M2, DType::kFp6E3M2, DType::kFp6E2M3, DType::kFp4}) {
    for (QScheme scheme : {QScheme::kPerTensor, QScheme::kPerChannel, QScheme::kPerGroup}) {
      for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
        QuantSpec spec = Spec(d, scheme);
        spec.group_size = 16;
        const at::Tensor x = RandomTensor({17, 48}, 5, t);
        auto p = ParamsOf(x, spec, TensorRole::kWeight);
        ASSERT_TRUE(p.ok()) << p.status();
        auto y = FakeQuantize(x, spec, *p);
        ASSERT_TRUE(y.ok());
        auto yy = FakeQuantize(*y, spec, *p);
        EXPECT_TRUE(BitEqual(*y, *yy)) << Name(d) << " " << Name(scheme) << " " << c10::toString(t);
        auto q = QuantizeReal(x, spec, *p);
        ASSERT_TRUE(q.ok());
        auto dq = Dequantize(*q, spec, t);
        ASSERT_TRUE(dq.ok()) << dq.status();
        EXPECT_TRUE(BitEqual(*dq, *y)) << Name(d) << " " << Name(scheme) << " " << c10::toString(t);
      }
    }
  }
}

TEST(FloatFormatTest, FastScaledPathMatchesTheRef) {
  for (DType d : {DType::kFp8E4M3, DType::kFp8E5M2, DType::kFp6E3M2, DType::kFp6E2M3, DType::kFp4}) {
    const at::Tensor x = RandomTensor({1025}, 13);
    auto p = ParamsOf(x, Spec(d), TensorRole::kWeight);
    auto y = FakeQuantize(x, Spec(d), *p);
    const float s = p->scale.item<float>();
    const kernels::FormatTraits& t = kernels::AllTraits()[static_cast<int>(d)];  // fp rows follow the DType order
    ASSERT_EQ(t.name, Name(d));
    const std::vector<float> xv = ToVector(x);
    const std::vector<float> yv = ToVector(*y);
    for (size_t i = 0; i < xv.size(); ++i) {
      const float v = std::fmin(std::fmax(xv[i] / s, -t.max), t.max);
      ASSERT_EQ(yv[i], t.round_ref(v) * s) << Name(d) << " element " << i;
    }
  }
}

TEST(FloatFormatTest, CastsRoundTrip) {
  const at::Tensor x = F32({1.0f + 1.0f / 512, 70000.0f, 1e-8f});
  auto bf = FakeQuantizeDynamic(x, Spec(DType::kBFloat16));
  auto h = FakeQuantizeDynamic(x, Spec(DType::kFloat16));
  ASSERT_TRUE(bf.ok() && h.ok());
  EXPECT_EQ(bf->scalar_type(), at::kFloat);
  EXPECT_TRUE(BitEqual(*bf, x.to(at::kBFloat16).to(at::kFloat)));
  EXPECT_TRUE(BitEqual(*h, x.to(at::kHalf).to(at::kFloat)));
  EXPECT_TRUE(std::isinf(ToVector(*h)[1]));
}

TEST(FloatFormatTest, AsymmetricFloatFormatIsRejected) {
  auto y = FakeQuantizeDynamic(F32({1.0f}), Spec(DType::kFp8E4M3, QScheme::kPerTensor, false));
  EXPECT_EQ(y.status().message(), "symmetric: false is not supported for fp8_e4m3");
}

}  // namespace
}  // namespace quark
