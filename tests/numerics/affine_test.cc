// Integer quantization: golden vectors computed by hand from numerics.md, round modes, scale dtypes, and
// properties (idempotence, error bound, real == fake, fast == Ref, strided == contiguous).
#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "core/numerics/fake_quant.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/real_quant.h"
#include "kernels/cpu/affine_kernels.h"
#include "kernels/cpu/reduce_kernels.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::F32;
using testing::RandomTensor;
using testing::Spec;
using testing::ToVector;

QuantParams Params(float s, int z) {
  return QuantParams{at::scalar_tensor(s, at::kFloat), at::scalar_tensor(z, at::kInt)};
}

TEST(AffineTest, SymmetricInt8DividesBy127Point5) {
  auto p = ComputeQuantParams(F32({-1.0f}).reshape({}), F32({127.5f}).reshape({}), Spec(DType::kInt8));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->scale.item<float>(), 1.0f);
  EXPECT_EQ(p->zero_point.item<int>(), 0);
  EXPECT_EQ(p->zero_point.scalar_type(), at::kInt);
  auto p4 = ComputeQuantParams(F32({-15.0f}).reshape({}), F32({1.0f}).reshape({}), Spec(DType::kInt4));
  EXPECT_EQ(p4->scale.item<float>(), 2.0f);  // 15 / 7.5
}

TEST(AffineTest, RoundMethodsOnTies) {
  const at::Tensor x = F32({127.5f, -127.5f, 2.5f, 3.5f, -2.5f, 0.49f, -0.5f, 1.7f});
  struct Case {
    RoundMethod method;
    std::vector<float> expected;
  };
  const std::vector<Case> cases = {
      {RoundMethod::kHalfEven, {127, -128, 2, 4, -2, 0, -0.0f, 2}},
      {RoundMethod::kRound, {127, -128, 3, 4, -3, 0, -1, 2}},
      {RoundMethod::kFloor, {127, -128, 2, 3, -3, 0, -1, 1}},
  };
  for (const Case& c : cases) {
    QuantSpec spec = Spec(DType::kInt8);
    spec.round_method = c.method;
    auto y = FakeQuantize(x, spec, Params(1.0f, 0));
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(ToVector(*y), c.expected) << Name(c.method);
    auto q = QuantizeReal(x, spec, Params(1.0f, 0));
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(ToVector(q->codes), c.expected) << Name(c.method);
  }
}

TEST(AffineTest, AsymmetricZeroPointAndClamping) {
  // uint8 over [-1, 3]: s = 4 / 255, z = 0 - round(-1 / s) = round(63.75) = 64.
  auto p = ComputeQuantParams(F32({-1.0f}).reshape({}), F32({3.0f}).reshape({}), Spec(DType::kUInt8, QScheme::kPerTensor, false));
  ASSERT_TRUE(p.ok());
  EXPECT_FLOAT_EQ(p->scale.item<float>(), 4.0f / 255.0f);
  EXPECT_EQ(p->zero_point.item<int>(), 64);
  // All-negative int8 range: mx = 0, z = -128 - round(-1 / (1/255)) = 127 = qmax.
  auto n = ComputeQuantParams(F32({-1.0f}).reshape({}), F32({-0.5f}).reshape({}), Spec(DType::kInt8, QScheme::kPerTensor, false));
  EXPECT_EQ(n->zero_point.item<int>(), 127);
  // All-positive range: mn = 0 so z = qmin.
  auto pos = ComputeQuantParams(F32({2.0f}).reshape({}), F32({5.1f}).reshape({}), Spec(DType::kInt8, QScheme::kPerTensor, false));
  EXPECT_EQ(pos->zero_point.item<int>(), -128);
  // Fake quantization clamps after adding z: x = 3 -> round(3 * 63.75) + 64 = 255 -> 255.
  auto y = FakeQuantize(F32({3.0f, -1.0f, 10.0f, -10.0f}), Spec(DType::kUInt8, QScheme::kPerTensor, false), *p);
  ASSERT_TRUE(y.ok());
  const float s = 4.0f / 255.0f;
  EXPECT_EQ(ToVector(*y), (std::vector<float>{(255 - 64) * s, (0 - 64) * s, (255 - 64) * s, (0 - 64) * s}));
}

TEST(AffineTest, SymmetricUnsignedClipsNegatives) {
  auto p = ComputeQuantParams(F32({-2.0f}).reshape({}), F32({1.0f}).reshape({}), Spec(DType::kUInt8));
  EXPECT_EQ(p->zero_point.item<int>(), 0);
  auto y = FakeQuantize(F32({-2.0f, 1.0f}), Spec(DType::kUInt8), *p);
  EXPECT_EQ(ToVector(*y)[0], 0.0f);
}

TEST(AffineTest, FloatZeroPointIsNotRounded) {
  QuantSpec spec = Spec(DType::kUInt4, QScheme::kPerTensor, false);
  spec.zero_point_type = ZeroPointType::kFloat32;
  auto p = ComputeQuantParams(F32({0.5f}).reshape({}), F32({2.0f}).reshape({}), spec);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->scale.item<float>(), 0.1f);                // (2 - 0.5) / 15
  EXPECT_FLOAT_EQ(p->zero_point.item<float>(), -5.0f);     // -min / s
  EXPECT_EQ(p->zero_point.scalar_type(), at::kFloat);
  auto degenerate = ComputeQuantParams(F32({1.0f}).reshape({}), F32({1.0f}).reshape({}), spec);
  EXPECT_EQ(degenerate->scale.item<float>(), 1.0f);
}

TEST(AffineTest, NonFiniteRangeGivesUnitScale) {
  auto p = ComputeQuantParams(F32({-INFINITY}).reshape({}), F32({1.0f}).reshape({}), Spec(DType::kInt8));
  EXPECT_EQ(p->scale.item<float>(), 1.0f);
  EXPECT_EQ(p->zero_point.item<int>(), 0);
}

TEST(AffineTest, ZeroRangeUsesEps) {
  auto p = ComputeQuantParams(F32({0.0f}).reshape({}), F32({0.0f}).reshape({}), Spec(DType::kInt8));
  EXPECT_EQ(p->scale.item<float>(), 1.1920929e-07f);
}

TEST(AffineTest, MultipliesByTheFloat32Reciprocal) {
  // amax 0.01: s = 0.01 / 127.5 in float32. x = -0.01: x * (1/s) = -127.5 exactly in float32 (ties to -128), while
  // x / s = -127.49999 would give -127. Likewise -0.00898039248 * (1/s) = -114.500008 -> -115 (x / s = -114.5 -> -114).
  auto p = ComputeQuantParams(F32({-0.01f}).reshape({}), F32({0.01f}).reshape({}), Spec(DType::kInt8));
  ASSERT_TRUE(p.ok());
  const float s = 0.01f / 127.5f;
  EXPECT_EQ(p->scale.item<float>(), s);
  auto y = FakeQuantize(F32({-0.01f, -0.00898039248f}), Spec(DType::kInt8), *p);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(ToVector(*y), (std::vector<float>{-128 * s, -115 * s}));
}

TEST(AffineTest, BFloat16InputWithScaleTypeFloatComputesInBFloat16) {
  const at::Tensor x = F32({1.0f, -0.25f}).to(at::kBFloat16);
  QuantSpec spec = Spec(DType::kInt8);
  auto bf = FakeQuantizeDynamic(x, spec);
  ASSERT_TRUE(bf.ok());
  EXPECT_EQ(bf->scalar_type(), at::kBFloat16);
  // bf16(1 / 127.5) = 1.0078125 * 2^-7 (the division rounds up in bfloat16): 1.0 * (1/s) = 127.0078 -> 127,
  // 127 * s = 0.99994 -> bfloat16 1.0.
  EXPECT_EQ(ToVector(*bf)[0], 1.0f);
  auto p = ParamsOf(x, spec, TensorRole::kWeight);
  EXPECT_EQ(p->scale.scalar_type(), at::kBFloat16);
  EXPECT_EQ(p->scale.item<float>(), 0.00787353515625f);
  spec.scale_type = ScaleType::kFloat32;
  auto f32 = FakeQuantizeDynamic(x, spec);
  // float32 scale 1/127.5: 1.0 -> 127 -> 127/127.5 = 0.996078..., bfloat16 -> 255/256.
  EXPECT_EQ(ToVector(*f32)[0], 0.99609375f);
}

TEST(AffineTest, Pof2ScaleRoundsTheExponent) {
  QuantSpec spec = Spec(DType::kInt8);
  spec.scale_type = ScaleType::kPof2;
  // s = 3 / 127.5 = 0.0235: -log2 = 5.41 -> 5 -> s = 1/32.
  auto p = ComputeQuantParams(F32({-3.0f}).reshape({}), F32({3.0f}).reshape({}), spec);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->scale.item<float>(), 1.0f / 32.0f);
  spec.dtype = DType::kInt4;
  EXPECT_FALSE(ComputeQuantParams(F32({-3.0f}), F32({3.0f}), spec).ok());
}

TEST(AffineTest, PerChannelAndPerGroupGoldens) {
  // Weight [2, 4]: per channel axis 0 -> scales 4/127.5 and 1/127.5.
  const at::Tensor w = F32({4, -2, 1, 0, 0.5f, -1, 0.25f, 0}).reshape({2, 4});
  auto p = ParamsOf(w, Spec(DType::kInt8, QScheme::kPerChannel), TensorRole::kWeight);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->scale.sizes(), (std::vector<int64_t>{2}));
  EXPECT_FLOAT_EQ(p->scale[0].item<float>(), 4.0f / 127.5f);
  QuantSpec g = Spec(DType::kUInt4, QScheme::kPerGroup, false);
  g.group_size = 2;
  auto pg = ParamsOf(w, g, TensorRole::kWeight);
  ASSERT_TRUE(pg.ok()) << pg.status();
  EXPECT_EQ(pg->scale.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_FLOAT_EQ(pg->scale[0][0].item<float>(), 6.0f / 15.0f);  // group [4, -2]
  EXPECT_EQ(pg->zero_point[0][0].item<int>(), 5);                // 0 - round(-2 / 0.4)
  g.group_size = 3;
  auto bad = ParamsOf(w, g, TensorRole::kWeight);
  EXPECT_EQ(bad.status().message(), "group_size: 3 does not divide 4 (axis 1 of [2, 4])");
}

TEST(AffineTest, PerTokenIsPerRowAtAnyBatchSize) {
  QuantSpec spec = Spec(DType::kInt8, QScheme::kPerChannel);
  spec.is_dynamic = true;
  const at::Tensor x = RandomTensor({3, 5, 16}, 1);
  auto y = FakeQuantizeDynamic(x, spec, TensorRole::kActivation);
  ASSERT_TRUE(y.ok());
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t t = 0; t < 5; ++t) {
      auto row = FakeQuantizeDynamic(x[b][t], Spec(DType::kInt8), TensorRole::kActivation);
      EXPECT_TRUE(BitEqual((*y)[b][t], *row)) << b << "," << t;
    }
  }
}

struct PropertyCase {
  DType dtype;
  QScheme scheme;
  bool symmetric;
  RoundMethod round;
  at::ScalarType input;
};

class AffinePropertyTest : public ::testing::TestWithParam<PropertyCase> {};

TEST_P(AffinePropertyTest, IdempotentBoundedRealEqualsFakeAndMatchesRef) {
  const PropertyCase c = GetParam();
  QuantSpec spec = Spec(c.dtype, c.scheme, c.symmetric);
  spec.round_method = c.round;
  if (c.scheme == QScheme::kPerGroup) spec.group_size = 32;
  for (int64_t cols : {32, 1056}) {
    const at::Tensor x = RandomTensor({17, cols}, 3 + cols, c.input);
    auto p = ParamsOf(x, spec, TensorRole::kWeight);
    ASSERT_TRUE(p.ok()) << p.status();
    auto y = FakeQuantize(x, spec, *p);
    ASSERT_TRUE(y.ok()) << y.status();
    // Floor is not idempotent with a float32 reciprocal: (q - z) * s * (1/s) may land just below q - z.
    if (c.round != RoundMethod::kFloor) {
      auto yy = FakeQuantize(*y, spec, *p);
      EXPECT_TRUE(BitEqual(*y, *yy)) << "not idempotent";
    }
    auto q = QuantizeReal(x, spec, *p);
    ASSERT_TRUE(q.ok()) << q.status();
    auto d = Dequantize(*q, spec, c.input);
    ASSERT_TRUE(d.ok()) << d.status();
    // numerics.md: real quantization rounds after adding z, fake quantization before. Identical when z = 0; with a
    // zero point the float32 sum x * (1/s) + z can round onto a tie, so codes may differ by one step there only.
    if (c.symmetric) {
      EXPECT_TRUE(BitEqual(*d, *y)) << "real + dequant != fake";
    } else {
      const at::Tensor diff = (d->to(at::kFloat) - y->to(at::kFloat)).abs();
      EXPECT_LT(diff.gt(0).sum().item<int64_t>(), 4) << "real + dequant differs from fake beyond tie cases";
    }
    // Scalar Ref and the error bound, element by element (float32 results before the cast to the input dtype).
    const at::Tensor xf = x.to(at::kFloat).contiguous();
    at::Tensor s = p->scale.to(at::kFloat);
    at::Tensor z = p->zero_point.to(at::kFloat);
    if (c.scheme == QScheme::kPerChannel) {
      s = s.reshape({-1, 1}).expand({17, cols}).contiguous();
      z = z.reshape({-1, 1}).expand({17, cols}).contiguous();
    } else if (c.scheme == QScheme::kPerGroup) {
      s = s.repeat_interleave(32, 1).contiguous();
      z = z.repeat_interleave(32, 1).contiguous();
    } else {
      s = s.expand({17, cols}).contiguous();
      z = z.expand({17, cols}).contiguous();
    }
    kernels::AffineArgs args;
    std::tie(args.qmin, args.qmax) = IntegerRange(c.dtype);
    args.round = c.round == RoundMethod::kHalfEven ? kernels::RoundMode::kHalfEven
                 : c.round == RoundMethod::kRound  ? kernels::RoundMode::kHalfAway
                                                   : kernels::RoundMode::kFloor;
    const std::vector<float> yv = ToVector(*y);
    for (int64_t i = 0; i < xf.numel(); ++i) {
      const float xi = xf.data_ptr<float>()[i];
      const float si = s.data_ptr<float>()[i];
      const float zi = z.data_ptr<float>()[i];
      const float ref = kernels::FakeQuantAffineRef(xi, si, zi, args);
      const float ref_cast = at::scalar_tensor(ref, at::kFloat).to(c.input).item<float>();
      ASSERT_EQ(yv[i], ref_cast) << "element " << i;
      const float lo = (args.qmin - zi) * si;
      const float hi = (args.qmax - zi) * si;
      if (c.round != RoundMethod::kFloor && c.input == at::kFloat && xi > lo && xi < hi) {
        ASSERT_LE(std::fabs(xi - yv[i]), si / 2 * (1 + 1e-5f)) << "element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grid, AffinePropertyTest,
    ::testing::Values(PropertyCase{DType::kInt8, QScheme::kPerTensor, true, RoundMethod::kHalfEven, at::kFloat},
                      PropertyCase{DType::kInt8, QScheme::kPerChannel, true, RoundMethod::kRound, at::kFloat},
                      PropertyCase{DType::kUInt8, QScheme::kPerChannel, false, RoundMethod::kFloor, at::kFloat},
                      PropertyCase{DType::kInt4, QScheme::kPerGroup, true, RoundMethod::kHalfEven, at::kBFloat16},
                      PropertyCase{DType::kUInt4, QScheme::kPerGroup, false, RoundMethod::kHalfEven, at::kFloat},
                      PropertyCase{DType::kUInt4, QScheme::kPerGroup, false, RoundMethod::kRound, at::kHalf},
                      PropertyCase{DType::kInt3, QScheme::kPerChannel, true, RoundMethod::kHalfEven, at::kFloat},
                      PropertyCase{DType::kInt2, QScheme::kPerTensor, false, RoundMethod::kFloor, at::kBFloat16}));

TEST(AffineTest, StridedInputEqualsContiguous) {
  const at::Tensor base = RandomTensor({64, 34}, 9);
  const at::Tensor strided = base.t();  // [34, 64], non-contiguous
  QuantSpec spec = Spec(DType::kInt8, QScheme::kPerChannel);
  auto a = FakeQuantizeDynamic(strided, spec);
  auto b = FakeQuantizeDynamic(strided.contiguous(), spec);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(BitEqual(*a, *b));
}

TEST(AffineTest, ChannelAxisLastUsesColumnScales) {
  const at::Tensor x = RandomTensor({5, 7}, 11);
  QuantSpec spec = Spec(DType::kInt8, QScheme::kPerChannel);
  spec.ch_axis = 1;
  auto y = FakeQuantizeDynamic(x, spec);
  auto yt = FakeQuantizeDynamic(x.t().contiguous(), Spec(DType::kInt8, QScheme::kPerChannel));
  ASSERT_TRUE(y.ok() && yt.ok());
  EXPECT_TRUE(BitEqual(*y, yt->t().contiguous()));
}

TEST(AffineTest, ErrorsNameTheField) {
  QuantSpec spec = Spec(DType::kInt8, QScheme::kPerChannel);
  spec.ch_axis = 3;
  auto y = FakeQuantizeDynamic(F32({1, 2}), spec);
  EXPECT_EQ(y.status().message(), "ch_axis: 3 is out of range for a tensor of shape [2]");
  auto bad_params = FakeQuantize(F32({1, 2}), Spec(DType::kInt8, QScheme::kPerChannel),
                                 QuantParams{F32({1, 2, 3}), at::zeros({3}, at::kInt)});
  EXPECT_EQ(bad_params.status().message(), "scale: shape [3] does not match the expected [2]");
  auto dtype = FakeQuantizeDynamic(at::ones({2}, at::kDouble), Spec(DType::kInt8));
  EXPECT_EQ(dtype.status().message(), "input: dtype Double is not float32, bfloat16 or float16");
}

TEST(AffineTest, NanPropagatesThroughFakeQuant) {
  auto y = FakeQuantize(F32({NAN, 1.0f}), Spec(DType::kInt8), Params(1.0f, 0));
  EXPECT_TRUE(std::isnan(ToVector(*y)[0]));
}

// The single-row entry GPTQ calls once a column equals the general kernel on the [1, n, 1] (a parameter per
// element) and [1, 1, n] (one parameter) layouts it stands for, out of place and in place.
TEST(AffineTest, RowEntryEqualsTheLayoutKernel) {
  const at::Tensor x = RandomTensor({1037}, 21) * 40;
  const int64_t n = x.numel();
  const at::Tensor scale = at::rand({n}) + 0.1, zero_point = at::randint(-3, 4, {n}).to(at::kFloat);
  for (const bool per_element : {true, false}) {
    for (const auto round : {kernels::RoundMode::kHalfEven, kernels::RoundMode::kHalfAway, kernels::RoundMode::kFloor}) {
      kernels::AffineArgs args;
      args.scale = scale.data_ptr<float>();
      args.zero_point = zero_point.data_ptr<float>();
      args.qmin = -8;
      args.qmax = 7;
      args.round = round;
      std::vector<float> inverse(static_cast<size_t>(per_element ? n : 1));
      for (size_t i = 0; i < inverse.size(); ++i) inverse[i] = 1.0f / args.scale[i];
      const kernels::ChannelLayout layout = per_element ? kernels::ChannelLayout{1, n, 1} : kernels::ChannelLayout{1, 1, n};
      at::Tensor expected = at::empty_like(x), row = at::empty_like(x), in_place = x.clone();
      kernels::FakeQuantAffine<float>(x.data_ptr<float>(), expected.data_ptr<float>(), layout, args);
      kernels::FakeQuantAffineRow(x.data_ptr<float>(), row.data_ptr<float>(), n, inverse.data(), per_element, args);
      kernels::FakeQuantAffineRow(in_place.data_ptr<float>(), in_place.data_ptr<float>(), n, inverse.data(),
                                  per_element, args);
      EXPECT_TRUE(BitEqual(row, expected)) << "per_element " << per_element;
      EXPECT_TRUE(BitEqual(in_place, expected)) << "per_element " << per_element;
    }
  }
}

// The min/max kernel's per-channel results for x (float32, bfloat16 or float16) read in `layout`.
std::pair<at::Tensor, at::Tensor> KernelMinMax(const at::Tensor& x, const kernels::ChannelLayout& layout) {
  at::Tensor min = at::empty({layout.channels}), max = at::empty({layout.channels});
  if (x.scalar_type() == at::kFloat) {
    kernels::ChannelMinMax<float>(x.data_ptr<float>(), layout, min.data_ptr<float>(), max.data_ptr<float>());
  } else if (x.scalar_type() == at::kBFloat16) {
    kernels::ChannelMinMax<c10::BFloat16>(x.data_ptr<c10::BFloat16>(), layout, min.data_ptr<float>(),
                                          max.data_ptr<float>());
  } else {
    kernels::ChannelMinMax<c10::Half>(x.data_ptr<c10::Half>(), layout, min.data_ptr<float>(), max.data_ptr<float>());
  }
  return {min, max};
}

// One scan per row of values [channels, elements] in element order: of equal extremes the first one seen stays, and
// a NaN anywhere makes both NaN.
std::pair<at::Tensor, at::Tensor> ScannedMinMax(const at::Tensor& values) {
  const int64_t channels = values.size(0);
  at::Tensor min = at::empty({channels}), max = at::empty({channels});
  for (int64_t c = 0; c < channels; ++c) {
    float lo = INFINITY, hi = -INFINITY;
    bool nan = false;
    for (int64_t i = 0; i < values.size(1); ++i) {
      const float v = values[c][i].item<float>();
      nan = nan || std::isnan(v);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    min[c] = nan ? NAN : lo;
    max[c] = nan ? NAN : hi;
  }
  return {min, max};
}

// The min/max kernel with one element per channel in each row (layout {rows, channels, 1}, as GPTQ reads a group
// down its block buffer) against one scan per channel in row order: NaN in a channel makes both NaN, the first of
// equal extremes (-0 before +0) wins, at widths with and without a vector tail, for every input type.
TEST(AffineTest, ColumnMinMaxEqualsOneScanPerChannel) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const auto& [rows, channels] : {std::pair<int64_t, int64_t>{1, 37}, {3, 2053}, {130, 64}}) {
      at::Tensor x = RandomTensor({rows, channels}, static_cast<uint64_t>(rows * channels), dtype);
      x[rows - 1][channels / 2] = NAN;  // a NaN in the last row still wins
      x[0][1] = 0.0f;
      if (rows > 1) {
        x[0][2] = -0.0f;
        x[1][2] = 0.0f;
        x[1][3] = -0.0f;
        x[0][3] = 0.0f;
        x.select(1, 2).slice(0, 2).fill_(1.0f);
        x.select(1, 3).slice(0, 2).fill_(1.0f);
      }
      const auto [min, max] = KernelMinMax(x, kernels::ChannelLayout{rows, channels, 1});
      const auto [expected_min, expected_max] = ScannedMinMax(x.to(at::kFloat).t());
      EXPECT_TRUE(BitEqual(min, expected_min)) << rows << "x" << channels << " " << dtype;
      EXPECT_TRUE(BitEqual(max, expected_max)) << rows << "x" << channels << " " << dtype;
    }
  }
}

// The min/max kernel over runs of contiguous elements (layout {outer, channels, inner}: a channel's inner elements in
// a row, as per-group and per-token observers read them) against one scan in element order: the runs are reduced in
// vector lanes, so the test places equal zeros of both signs where lanes would meet them out of order (-0 seen first
// by the scan in one lane's later element, +0 earlier in another lane), NaN anywhere, and runs with vector tails.
TEST(AffineTest, RunMinMaxEqualsOneScan) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const int64_t inner : {5, 16, 128, 1037}) {
      const int64_t channels = 6;
      at::Tensor x = RandomTensor({channels, inner}, static_cast<uint64_t>(inner), dtype).abs() + 1;  // positive
      if (inner > 17) {
        x[0][1] = 0.0f;    // lane 1: +0 first in element order
        x[0][16] = -0.0f;  // lane 0: -0 later: the scan keeps +0
        x[1][0] = -0.0f;   // the reverse
        x[1][17] = 0.0f;
        x[2] = -x[2];      // negative: the maximum is the zero
        x[2][3] = -0.0f;
        x[2][inner - 1] = 0.0f;
        x[3][inner - 1] = NAN;
      }
      x[4][inner / 2] = -7.0f;  // a plain minimum in the middle
      const auto [min, max] = KernelMinMax(x, kernels::ChannelLayout{1, channels, inner});
      const auto [expected_min, expected_max] = ScannedMinMax(x.to(at::kFloat));
      EXPECT_TRUE(BitEqual(min, expected_min)) << inner << " " << dtype;
      EXPECT_TRUE(BitEqual(max, expected_max)) << inner << " " << dtype;
    }
  }
}

// The codes kernel (vectorized per rounding mode) equals numerics.md's formula element by element: q = clamp(round(x *
// (1/s) + z), qmin, qmax) with NaN -> qmin, for runs of one channel and for rows of per-element channels, on ties,
// NaN, infinities and values far outside the grid, signed and unsigned codes.
template <typename Q>
void ExpectCodesFollowTheFormula(int qmin, int qmax) {
  const int64_t rows = 9, channels = 67;
  at::Tensor x = RandomTensor({rows * channels}, 33) * 12;
  x.index_put_({at::indexing::Slice(0, 40)}, at::arange(-10, 10, 0.5));  // exact ties with s = 1, z integer
  x[41] = std::nanf("");
  x[42] = INFINITY;
  x[43] = -INFINITY;
  x[44] = 1e30f;
  x[45] = -1e30f;
  const at::Tensor scale = at::rand({channels}) + 0.25;
  scale[0] = 1.0f;
  const at::Tensor zero_point = at::randint(qmin, qmax + 1, {channels}).to(at::kFloat);
  for (const bool per_element : {false, true}) {
    for (const auto round : {kernels::RoundMode::kHalfEven, kernels::RoundMode::kHalfAway, kernels::RoundMode::kFloor}) {
      kernels::AffineArgs args;
      args.scale = scale.data_ptr<float>();
      args.zero_point = zero_point.data_ptr<float>();
      args.qmin = qmin;
      args.qmax = qmax;
      args.round = round;
      // Runs: channel c owns elements [c * rows, (c + 1) * rows). Rows: element i uses channel i % channels.
      const kernels::ChannelLayout layout =
          per_element ? kernels::ChannelLayout{rows, channels, 1} : kernels::ChannelLayout{1, channels, rows};
      std::vector<Q> codes(static_cast<size_t>(x.numel()));
      kernels::QuantizeAffine<float, Q>(x.data_ptr<float>(), codes.data(), layout, args);
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t c = per_element ? i % channels : i / rows;
        const float v = x.data_ptr<float>()[i] * (1.0f / args.scale[c]) + args.zero_point[c];
        const float r = round == kernels::RoundMode::kHalfEven   ? std::nearbyint(v)
                        : round == kernels::RoundMode::kHalfAway ? std::round(v)
                                                                 : std::floor(v);
        const int expected = std::isnan(v) ? qmin : static_cast<int>(std::fmin(std::fmax(r, qmin), qmax));
        ASSERT_EQ(static_cast<int>(codes[static_cast<size_t>(i)]), expected)
            << "element " << i << " (x = " << x.data_ptr<float>()[i] << "), per_element " << per_element
            << ", round " << static_cast<int>(round);
      }
    }
  }
}

TEST(AffineTest, CodesFollowTheFormulaElementByElement) {
  ExpectCodesFollowTheFormula<int8_t>(-128, 127);
  ExpectCodesFollowTheFormula<int8_t>(-8, 7);
  ExpectCodesFollowTheFormula<uint8_t>(0, 15);
  ExpectCodesFollowTheFormula<uint8_t>(0, 255);
}

}  // namespace
}  // namespace quark
