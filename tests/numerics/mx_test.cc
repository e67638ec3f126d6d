// OCP MX: shared exponents in even / floor / ceil modes next to binade edges, tails, MXINT8 (sign of zero included),
// fast vs Ref.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/numerics/fake_quant.h"
#include "core/numerics/packing.h"
#include "core/numerics/real_quant.h"
#include "kernels/cpu/mx_kernels.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::F32;
using testing::RandomTensor;
using testing::ToVector;

QuantSpec Mx(DType element, ScaleCalculationMode mode = ScaleCalculationMode::kEven) {
  QuantSpec s;
  s.dtype = element;
  s.scale_format = ScaleFormat::kE8M0;
  s.qscheme = QScheme::kPerGroup;
  s.group_size = 32;
  s.is_dynamic = true;
  s.scale_calculation_mode = mode;
  return s;
}

// A block of 32 whose amax is `amax` (the rest small).
at::Tensor Block(float amax) {
  at::Tensor x = at::full({32}, 0.1f, at::kFloat);
  x[5] = amax;
  return x;
}

// Equal values with the same sign (so -0 and +0 differ).
bool SameValueAndSign(float a, float b) { return a == b && std::signbit(a) == std::signbit(b); }

kernels::MxArgs ArgsOf(DType el, ScaleCalculationMode mode, RoundMethod round = RoundMethod::kHalfEven) {
  kernels::MxArgs args;
  args.element =
      el == DType::kInt8 ? kernels::ElemFormat::kInt8 : static_cast<kernels::ElemFormat>(static_cast<int>(el));
  args.mode = static_cast<kernels::MxScaleMode>(static_cast<int>(mode));
  args.round = static_cast<kernels::RoundMode>(static_cast<int>(round));
  return args;
}

int SharedExp(float amax, DType el, ScaleCalculationMode mode) {
  auto p = ParamsOf(Block(amax), Mx(el, mode), TensorRole::kWeight);
  EXPECT_TRUE(p.ok()) << p.status();
  return std::ilogb(p->scale.item<float>());
}

TEST(MxTest, SharedExponentModesNearBinadeEdges) {
  using M = ScaleCalculationMode;
  // fp4 (1 mantissa bit, emax 2). 7.0 = 1.75 * 2^2 rounds up at fp4 precision: even moves up a binade.
  EXPECT_EQ(SharedExp(7.0f, DType::kFp4, M::kEven), 1);
  EXPECT_EQ(SharedExp(7.0f, DType::kFp4, M::kFloor), 0);
  EXPECT_EQ(SharedExp(7.0f, DType::kFp4, M::kCeil), 1);
  // 6.5 = 1.625 * 2^2 does not round up.
  EXPECT_EQ(SharedExp(6.5f, DType::kFp4, M::kEven), 0);
  EXPECT_EQ(SharedExp(6.5f, DType::kFp4, M::kFloor), 0);
  EXPECT_EQ(SharedExp(6.5f, DType::kFp4, M::kCeil), 1);
  // Exactly a power of two: ceil stays.
  EXPECT_EQ(SharedExp(4.0f, DType::kFp4, M::kCeil), 0);
  EXPECT_EQ(SharedExp(4.0f, DType::kFp4, M::kEven), 0);
  // Just below a binade edge: 3.9 in [2, 4).
  EXPECT_EQ(SharedExp(3.9f, DType::kFp4, M::kEven), 0);
  EXPECT_EQ(SharedExp(3.9f, DType::kFp4, M::kFloor), -1);
  EXPECT_EQ(SharedExp(3.9f, DType::kFp4, M::kCeil), 0);
  // fp8_e4m3 (3 mantissa bits, emax 8): 1.9375 * 2^0 rounds up at e4m3 precision, 1.875 does not.
  EXPECT_EQ(SharedExp(1.9375f, DType::kFp8E4M3, M::kEven), 1 - 8);
  EXPECT_EQ(SharedExp(1.875f, DType::kFp8E4M3, M::kEven), 0 - 8);
  EXPECT_EQ(SharedExp(1.9375f, DType::kFp8E4M3, M::kFloor), 0 - 8);
}

TEST(MxTest, Fp4BlockGolden) {
  // amax 7 in even mode: s = 2; 7 / 2 = 3.5 ties to 4 -> 8; 0.1 / 2 = 0.05 -> 0.
  auto y = FakeQuantizeDynamic(Block(7.0f), Mx(DType::kFp4));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(ToVector(*y)[5], 8.0f);
  EXPECT_EQ(ToVector(*y)[0], 0.0f);
  // Floor mode: s = 1, 7 saturates to 6.
  auto f = FakeQuantizeDynamic(Block(7.0f), Mx(DType::kFp4, ScaleCalculationMode::kFloor));
  EXPECT_EQ(ToVector(*f)[5], 6.0f);
  EXPECT_EQ(ToVector(*f)[0], 0.0f);
}

TEST(MxTest, ZeroBlockAndExponentClamp) {
  auto z = ParamsOf(at::zeros({32}), Mx(DType::kFp4), TensorRole::kWeight);
  EXPECT_EQ(z->scale.item<float>(), std::ldexp(1.0f, -126));
  auto e = ScaleToE8M0(z->scale);
  EXPECT_EQ(e->item<uint8_t>(), 1);
  auto tiny = ParamsOf(at::full({32}, 1e-40f), Mx(DType::kFp8E5M2, ScaleCalculationMode::kFloor),
                       TensorRole::kWeight);
  EXPECT_EQ(std::ilogb(tiny->scale.item<float>()), -127);
  EXPECT_EQ(ScaleToE8M0(tiny->scale)->item<uint8_t>(), 0);
}

TEST(MxTest, MxInt8Golden) {
  // amax 1: s = 1, elements x / (1/64): 1 -> 64, 0.5 -> 32, 1/128 -> 0.5 -> 0 (even), 1.5/64 -> 1.5 -> 2.
  at::Tensor x = at::zeros({32});
  x[0] = 1.0f;
  x[1] = 0.5f;
  x[2] = 1.0f / 128;
  x[3] = 1.5f / 64;
  x[4] = -1.0f;
  QuantSpec spec = Mx(DType::kInt8);
  auto y = FakeQuantizeDynamic(x, spec);
  ASSERT_TRUE(y.ok()) << y.status();
  const std::vector<float> v = ToVector(*y);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 0.5f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_EQ(v[3], 2.0f / 64);
  EXPECT_EQ(v[4], -1.0f);
  spec.round_method = RoundMethod::kRound;
  EXPECT_EQ(ToVector(*FakeQuantizeDynamic(x, spec))[2], 1.0f / 64);
  auto q = QuantizeReal(x, Mx(DType::kInt8), QuantParams{});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->codes.scalar_type(), at::kChar);
  EXPECT_EQ(q->codes[0].item<int8_t>(), 64);
  EXPECT_EQ(q->scale.item<uint8_t>(), 127);
}

// AMD Quark computes MXINT8 as torch.round(x / scale) * scale: a negative element that rounds to zero gives -0, a
// positive one +0 (as the MX float formats do). Blocks of amax 1 (s = 1/64): +-1e-3 are codes -0 / +0 in half_even
// and round; floor takes them to -1 / +0, and keeps the sign of an exact -0. Whole blocks, a tail after a block, a
// short row; float32, bfloat16 (the fused bfloat16 loops) and float16; dynamic and with static exponents.
TEST(MxTest, MxInt8KeepsTheSignOfZero) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (RoundMethod round : {RoundMethod::kHalfEven, RoundMethod::kRound, RoundMethod::kFloor}) {
      for (int64_t len : {32, 64, 17, 40, 1025}) {
        std::vector<float> v(static_cast<size_t>(2 * len));
        for (size_t i = 0; i < v.size(); ++i) {
          const int64_t col = static_cast<int64_t>(i) % len;
          const float small = col % 4 == 0 ? -1e-3f : col % 4 == 1 ? 1e-3f : col % 4 == 2 ? -0.0f : 0.0f;
          v[i] = col % 32 == 5 || col == len - 1 ? 1.0f : small;  // every block (tails too) has amax 1
        }
        const at::Tensor x = F32(v).reshape({2, len}).to(dtype);
        QuantSpec spec = Mx(DType::kInt8);
        spec.round_method = round;
        auto y = FakeQuantizeDynamic(x, spec);
        ASSERT_TRUE(y.ok()) << y.status();
        ASSERT_EQ(y->scalar_type(), dtype);
        QuantSpec static_spec = spec;
        static_spec.is_dynamic = false;
        auto p = ParamsOf(x, static_spec, TensorRole::kWeight);
        ASSERT_TRUE(p.ok()) << p.status();
        auto ys = FakeQuantize(x, static_spec, *p);
        ASSERT_TRUE(ys.ok()) << ys.status();
        EXPECT_TRUE(BitEqual(*ys, *y)) << "static exponents, len " << len;
        const std::vector<float> xv = ToVector(x);
        const std::vector<float> yv = ToVector(*y);
        const std::string where = std::string(c10::toString(dtype)) + " round " +
                                  std::to_string(static_cast<int>(round)) + " len " + std::to_string(len);
        for (size_t i = 0; i < xv.size(); ++i) {
          const std::string at_i = where + " i " + std::to_string(i) + " x " + std::to_string(xv[i]);
          if (xv[i] == 1.0f) {
            EXPECT_EQ(yv[i], 1.0f) << at_i;
          } else if (round == RoundMethod::kFloor && xv[i] < 0.0f) {
            EXPECT_EQ(yv[i], -1.0f / 64) << at_i;
          } else {
            EXPECT_EQ(yv[i], 0.0f) << at_i;
            EXPECT_EQ(std::signbit(yv[i]), std::signbit(xv[i])) << at_i;
          }
        }
        // The scalar reference agrees, sign of zero included.
        const kernels::MxArgs args = ArgsOf(DType::kInt8, spec.scale_calculation_mode, round);
        for (int64_t off = 0; off < 2 * len; off += len) {
          for (int64_t start = 0; start < len; start += 32) {
            const int n = static_cast<int>(std::min<int64_t>(32, len - start));
            std::vector<float> ref(n);
            kernels::MxFakeQuantBlockRef(&xv[off + start], ref.data(), n, args);
            for (int i = 0; i < n; ++i) {
              const float got = yv[off + start + i];
              ASSERT_TRUE(SameValueAndSign(got, ref[i])) << where << " i " << off + start + i << ": " << got
                                                         << " vs ref " << ref[i];
            }
          }
        }
      }
    }
  }
}

TEST(MxTest, LegacyDtypeMxSpelling) {
  QuantSpec legacy;
  legacy.dtype = DType::kMx;
  legacy.mx_element_dtype = DType::kFp4;
  legacy.qscheme = QScheme::kPerGroup;
  legacy.group_size = 32;
  legacy.is_dynamic = true;
  const at::Tensor x = RandomTensor({4, 64}, 21);
  auto a = FakeQuantizeDynamic(x, legacy);
  auto b = FakeQuantizeDynamic(x, Mx(DType::kFp4));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status();
  EXPECT_TRUE(BitEqual(*a, *b));
  legacy.mx_element_dtype.reset();
  EXPECT_EQ(FakeQuantizeDynamic(x, legacy).status().message(), "mx_element_dtype: required for dtype mx");
}

TEST(MxTest, TailsAndEveryElementTypeMatchTheRef) {
  for (DType el : {DType::kFp4, DType::kFp6E2M3, DType::kFp6E3M2, DType::kFp8E4M3, DType::kFp8E5M2, DType::kInt8}) {
    for (ScaleCalculationMode mode :
         {ScaleCalculationMode::kEven, ScaleCalculationMode::kFloor, ScaleCalculationMode::kCeil}) {
      const QuantSpec spec = Mx(el, mode);
      for (int64_t len : {1, 17, 40, 1025}) {
        const at::Tensor x = RandomTensor({3, len}, 100 + len);
        auto y = FakeQuantizeDynamic(x, spec);
        ASSERT_TRUE(y.ok()) << y.status();
        const kernels::MxArgs args = ArgsOf(el, mode);
        const std::vector<float> xv = ToVector(x);
        const std::vector<float> yv = ToVector(*y);
        for (int64_t r = 0; r < 3; ++r) {
          for (int64_t start = 0; start < len; start += 32) {
            const int n = static_cast<int>(std::min<int64_t>(32, len - start));
            std::vector<float> ref(n);
            kernels::MxFakeQuantBlockRef(&xv[r * len + start], ref.data(), n, args);
            for (int i = 0; i < n; ++i) {
              const float got = yv[r * len + start + i];
              ASSERT_TRUE(SameValueAndSign(got, ref[i]))
                  << Name(el) << " len " << len << " row " << r << " i " << start + i << ": " << got << " vs ref "
                  << ref[i];
            }
          }
        }
        // Static params from the block observer give the same result; real + dequant equals fake.
        QuantSpec static_spec = spec;
        static_spec.is_dynamic = false;
        auto p = ParamsOf(x, static_spec, TensorRole::kWeight);
        ASSERT_TRUE(p.ok()) << p.status();
        EXPECT_TRUE(BitEqual(*FakeQuantize(x, static_spec, *p), *y));
        auto q = QuantizeReal(x, spec, QuantParams{});
        ASSERT_TRUE(q.ok()) << q.status();
        auto d = Dequantize(*q, spec, at::kFloat);
        ASSERT_TRUE(d.ok()) << d.status();
        if (el == DType::kInt8) {
          // An int8 code has no -0: a negative element that rounds to zero dequantizes to +0, fake quantization
          // keeps -0 (as Quark). Equal values otherwise.
          EXPECT_TRUE(at::equal(*d, *y)) << Name(el) << " len " << len;
        } else {
          EXPECT_TRUE(BitEqual(*d, *y)) << Name(el) << " len " << len;
        }
      }
    }
  }
}

// Blocks whose amax is far below 2^-121: an MXINT8 element is x / 2^(e - 6), and 2^(6 - e) is above the largest
// float when e < -121, so the kernels must still scale exactly (subnormal inputs included).
TEST(MxTest, TinyBlocksMatchTheRef) {
  for (DType el : {DType::kInt8, DType::kFp4, DType::kFp8E4M3}) {
    for (ScaleCalculationMode mode : {ScaleCalculationMode::kEven, ScaleCalculationMode::kFloor}) {
      for (double magnitude : {1e-36, 1e-37, 1e-39, 1e-44}) {
        for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
          const at::Tensor x = (RandomTensor({2, 64}, 7) * magnitude).to(dtype);
          QuantSpec spec = Mx(el, mode);
          auto y = FakeQuantizeDynamic(x, spec);
          ASSERT_TRUE(y.ok()) << y.status();
          const kernels::MxArgs args = ArgsOf(el, mode);
          const std::vector<float> xv = ToVector(x);
          const std::vector<float> yv = ToVector(*y);
          for (size_t start = 0; start < xv.size(); start += 32) {
            std::vector<float> ref(32);
            kernels::MxFakeQuantBlockRef(&xv[start], ref.data(), 32, args);
            for (int i = 0; i < 32; ++i) {
              ASSERT_TRUE(SameValueAndSign(yv[start + i], ref[i]))
                  << Name(el) << " magnitude " << magnitude << " i " << start + i << ": " << yv[start + i] << " vs ref "
                  << ref[i];
            }
          }
          auto q = QuantizeReal(x, spec, QuantParams{});
          ASSERT_TRUE(q.ok()) << q.status();
          auto d = Dequantize(*q, spec, dtype);
          ASSERT_TRUE(d.ok()) << d.status();
          const std::vector<float> dv = ToVector(*d);
          for (size_t i = 0; i < dv.size(); ++i) {
            if (dv[i] == 0.0f && yv[i] == 0.0f) continue;  // an MXINT8 code has no -0
            ASSERT_EQ(dv[i], yv[i]) << "real + dequant " << Name(el) << " magnitude " << magnitude << " i " << i;
          }
        }
      }
    }
  }
}

TEST(MxTest, BlocksAlongANonLastAxisAndBFloat16) {
  QuantSpec spec = Mx(DType::kFp8E4M3);
  spec.ch_axis = 0;
  const at::Tensor x = RandomTensor({64, 3}, 31, at::kBFloat16);
  auto y = FakeQuantizeDynamic(x, spec);
  auto yt = FakeQuantizeDynamic(x.t().contiguous(), Mx(DType::kFp8E4M3));
  ASSERT_TRUE(y.ok() && yt.ok());
  EXPECT_EQ(y->scalar_type(), at::kBFloat16);
  EXPECT_TRUE(BitEqual(*y, yt->t().contiguous()));
}

}  // namespace
}  // namespace quark
