// Packing for export: word layouts by hand, round trips, and the per-group transposed int4 layout.
#include <gtest/gtest.h>

#include "core/numerics/fake_quant.h"
#include "core/numerics/packing.h"
#include "core/numerics/real_quant.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::RandomTensor;
using testing::Spec;

at::Tensor Bytes(std::vector<int> v, at::ScalarType t = at::kByte) {
  return at::tensor(at::ArrayRef<int>(v), at::kInt).to(t);
}

TEST(PackingTest, Int4WordLayouts) {
  const at::Tensor codes = Bytes({0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(PackInt4(codes, PackMethod::kReorder)->item<int32_t>(), 0x75316420);
  EXPECT_EQ(PackInt4(codes, PackMethod::kOrder)->item<int32_t>(), 0x76543210);
  const at::Tensor signed_codes = Bytes({-1, -8, 7, 0, 1, 2, 3, 4}, at::kChar);
  const int32_t word = PackInt4(signed_codes, PackMethod::kOrder)->item<int32_t>();
  EXPECT_EQ(static_cast<uint32_t>(word), 0x4321078Fu);
  auto back = UnpackInt4(at::scalar_tensor(word, at::kInt).reshape({1}), PackMethod::kOrder, true);
  EXPECT_TRUE(BitEqual(*back, signed_codes));
  EXPECT_EQ(PackInt4(Bytes({1, 2, 3}), PackMethod::kOrder).status().message(),
            "codes: last dimension 3 of [3] is not a multiple of 8");
}

TEST(PackingTest, Fp4AndFp6Layouts) {
  EXPECT_TRUE(BitEqual(*PackFp4(Bytes({0x1, 0xF, 0x7, 0x8})), Bytes({0xF1, 0x87})));
  // 1 | 2 << 6 | 3 << 12 | 4 << 18 = 0x103081, little-endian.
  EXPECT_TRUE(BitEqual(*PackFp6(Bytes({1, 2, 3, 4})), Bytes({0x81, 0x30, 0x10})));
  const at::Tensor codes6 = at::randint(0, 64, {5, 16}, at::kByte);
  EXPECT_TRUE(BitEqual(*UnpackFp6(*PackFp6(codes6)), codes6));
  const at::Tensor codes4 = at::randint(0, 16, {3, 34}, at::kByte);
  EXPECT_TRUE(BitEqual(*UnpackFp4(*PackFp4(codes4)), codes4));
}

TEST(PackingTest, E8M0) {
  const at::Tensor s = testing::F32({1.0f, 0.25f, 1024.0f, std::ldexp(1.0f, -127)});
  auto e = ScaleToE8M0(s);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(BitEqual(*e, Bytes({127, 125, 137, 0})));
  EXPECT_TRUE(BitEqual(E8M0ToScale(*e), s));
  EXPECT_EQ(ScaleToE8M0(testing::F32({3.0f})).status().message(),
            "scale: element 0 = 3 is not a power of two in [2^-127, 2^127]");
}

TEST(PackingTest, PerGroupInt4ExportIsTransposed) {
  QuantSpec spec = Spec(DType::kUInt4, QScheme::kPerGroup, false);
  spec.group_size = 32;
  const at::Tensor w = RandomTensor({16, 64}, 41);  // (out, in)
  auto p = ParamsOf(w, spec, TensorRole::kWeight);
  auto q = QuantizeReal(w, spec, *p);
  ASSERT_TRUE(q.ok()) << q.status();
  auto packed = PackForExport(*q, spec, PackMethod::kReorder);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->codes.sizes(), (std::vector<int64_t>{64, 2}));      // (in, out / 8)
  EXPECT_EQ(packed->scale.sizes(), (std::vector<int64_t>{2, 16}));      // (in / group, out)
  EXPECT_EQ(packed->zero_point.sizes(), (std::vector<int64_t>{2, 2}));  // (in / group, out / 8)
  EXPECT_EQ(packed->zero_point.scalar_type(), at::kInt);
  auto back = UnpackFromExport(*packed, spec, PackMethod::kReorder);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(BitEqual(back->codes, q->codes));
  EXPECT_TRUE(BitEqual(back->zero_point, q->zero_point));
  auto d = Dequantize(*back, spec, at::kFloat);
  EXPECT_TRUE(BitEqual(*d, *FakeQuantize(w, spec, *p)));
}

TEST(PackingTest, EveryDtypeRoundTripsThroughExport) {
  for (DType d : {DType::kInt8, DType::kUInt8, DType::kInt4, DType::kInt3, DType::kFp8E4M3, DType::kFp8E5M2,
                  DType::kFp6E3M2, DType::kFp6E2M3, DType::kFp4}) {
    for (bool mx : {false, true}) {
      if (mx && IsIntegerType(d) && d != DType::kInt8) continue;
      QuantSpec spec = Spec(d, mx ? QScheme::kPerGroup : QScheme::kPerChannel);
      if (mx) {
        spec.scale_format = ScaleFormat::kE8M0;
        spec.group_size = 32;
      }
      const at::Tensor w = RandomTensor({8, 64}, 43);
      auto p = ParamsOf(w, spec, TensorRole::kWeight);
      ASSERT_TRUE(p.ok()) << p.status();
      auto q = QuantizeReal(w, spec, *p);
      ASSERT_TRUE(q.ok()) << q.status();
      auto packed = PackForExport(*q, spec, PackMethod::kReorder);
      ASSERT_TRUE(packed.ok()) << packed.status();
      auto back = UnpackFromExport(*packed, spec, PackMethod::kReorder);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(BitEqual(back->codes, q->codes)) << Name(d) << " mx " << mx;
      auto deq = Dequantize(*back, spec, at::kFloat);
      ASSERT_TRUE(deq.ok()) << deq.status();
      const at::Tensor fake = *FakeQuantize(w, spec, *p);
      if (mx && d == DType::kInt8) {
        // An int8 code has no -0: where MXINT8 fake quantization gives -0 (a negative element that rounds to zero,
        // as in Quark) the codes dequantize to +0. Equal values.
        EXPECT_TRUE(at::equal(*deq, fake)) << Name(d) << " mx " << mx;
      } else {
        EXPECT_TRUE(BitEqual(*deq, fake)) << Name(d) << " mx " << mx;
      }
    }
  }
}

}  // namespace
}  // namespace quark
