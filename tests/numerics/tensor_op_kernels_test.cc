// The tensor-op kernels (what a tensor on any non-CPU device runs) against the vectorized CPU kernels on CPU tensors,
// bit for bit: integer, small-float and MX fake quantization in every rounding mode, with integer and float zero
// points, per tensor / channel / element column / group layouts, float32 / bfloat16 / float16, odd sizes, ties,
// NaN, +-Inf, -0 and subnormals; and the min/max and MX amax reductions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/numerics/quant_kernels.h"
#include "kernels/cpu/format_traits.h"
#include "tests/numerics/test_util.h"

namespace quark::testing {
namespace {

using kernels::ChannelLayout;
using kernels::ElemFormat;

constexpr ChannelLayout kLayouts[] = {{1, 1, 1}, {1, 1, 17}, {1, 17, 1}, {1, 1, 1025}, {3, 17, 1},
                                      {5, 7, 32}, {1, 33, 31}, {2, 4, 1025}};
constexpr at::ScalarType kDtypes[] = {at::kFloat, at::kBFloat16, at::kHalf};

// Values with a spread of magnitudes around `unit`, exact ties of every rounding mode, and the special values.
at::Tensor Inputs(int64_t n, uint64_t seed, float unit, at::ScalarType dtype) {
  at::Tensor v = RandomTensor({n}, seed) * unit * 16.0f;
  const at::Tensor ties = at::round(RandomTensor({n}, seed + 1) * 40.0f) * (0.5f * unit);
  const at::Tensor index = at::arange(n);
  v = at::where(index.remainder(5) == 1, ties, v);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 1e-40f, -3.0e38f, 1e-30f};
  for (int64_t i = 0; i < n; i += 7) v[i] = specials[(i / 7) % 8];
  return v.to(dtype);
}

std::string Describe(const ChannelLayout& l, at::ScalarType dtype) {
  return std::string(c10::toString(dtype)) + " [" + std::to_string(l.outer) + "," + std::to_string(l.channels) + "," +
         std::to_string(l.inner) + "]";
}

void ExpectBitEqual(const at::Tensor& cpu, const at::Tensor& ops, const std::string& what) {
  if (BitEqual(cpu, ops)) return;
  const at::Tensor a = cpu.to(at::kFloat);
  const at::Tensor b = ops.to(at::kFloat);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.reshape({-1})[i].item<float>();
    const float y = b.reshape({-1})[i].item<float>();
    if (std::memcmp(&x, &y, 4) != 0) {
      ADD_FAILURE() << what << ": element " << i << " cpu " << x << " tensor-ops " << y;
      return;
    }
  }
  ADD_FAILURE() << what << ": bits differ (NaN payloads)";
}

struct IntGrid {
  int qmin, qmax;
};

TEST(TensorOpKernelsTest, AffineFakeQuantIsTheCpuKernelsBitForBit) {
  const QuantKernels& cpu = CpuQuantKernels();
  const QuantKernels& ops = TensorOpQuantKernels();
  uint64_t seed = 10;
  for (const ChannelLayout& l : kLayouts) {
    for (const IntGrid& grid : {IntGrid{-128, 127}, IntGrid{0, 255}, IntGrid{-8, 7}, IntGrid{0, 15}}) {
      for (auto round : {kernels::RoundMode::kHalfEven, kernels::RoundMode::kHalfAway, kernels::RoundMode::kFloor}) {
        for (bool float_zero : {false, true}) {
          AffineKernelArgs args;
          args.scale = at::rand({l.channels}, at::detail::createCPUGenerator(++seed)) * 0.5f + 0.01f;
          const at::Tensor z = grid.qmin < 0 ? at::zeros({l.channels})
                                             : at::randint(grid.qmin, grid.qmax + 1, {l.channels},
                                                           at::detail::createCPUGenerator(seed), at::kFloat);
          args.zero_point = float_zero ? z + 0.37f : z;
          args.qmin = grid.qmin;
          args.qmax = grid.qmax;
          args.round = round;
          args.float_zero_point = float_zero;
          for (at::ScalarType dtype : kDtypes) {
            const at::Tensor x = Inputs(l.Numel(), seed, args.scale[0].item<float>(), dtype);
            at::Tensor a = at::empty_like(x);
            at::Tensor b = at::empty_like(x);
            cpu.FakeAffine(x, a, l, args);
            ops.FakeAffine(x, b, l, args);
            ExpectBitEqual(a, b, "affine " + Describe(l, dtype) + " q[" + std::to_string(grid.qmin) + "," +
                                     std::to_string(grid.qmax) + "] round " + std::to_string(static_cast<int>(round)) +
                                     (float_zero ? " float zp" : ""));
          }
        }
      }
    }
  }
}

TEST(TensorOpKernelsTest, FloatFormatFakeQuantIsTheCpuKernelsBitForBit) {
  uint64_t seed = 200;
  for (const ChannelLayout& l : kLayouts) {
    for (ElemFormat format : {ElemFormat::kFp8E4M3, ElemFormat::kFp8E5M2, ElemFormat::kFp6E3M2, ElemFormat::kFp6E2M3,
                              ElemFormat::kFp4E2M1}) {
      const at::Tensor scale = at::rand({l.channels}, at::detail::createCPUGenerator(++seed)) * 0.5f + 0.01f;
      for (at::ScalarType dtype : kDtypes) {
        const at::Tensor x = Inputs(l.Numel(), seed, scale[0].item<float>() * kernels::Traits(format).max / 16, dtype);
        at::Tensor a = at::empty_like(x);
        at::Tensor b = at::empty_like(x);
        CpuQuantKernels().FakeFloat(x, a, l, scale, format);
        TensorOpQuantKernels().FakeFloat(x, b, l, scale, format);
        ExpectBitEqual(a, b, std::string(kernels::Traits(format).name) + " " + Describe(l, dtype));
      }
    }
  }
}

TEST(TensorOpKernelsTest, MxFakeQuantIsTheCpuKernelsBitForBit) {
  uint64_t seed = 400;
  struct Shape {
    int64_t rows, len;
  };
  for (Shape shape : {Shape{1, 1}, Shape{1, 17}, Shape{3, 32}, Shape{2, 100}, Shape{4, 1025}}) {
    const int64_t blocks = shape.rows * kernels::MxBlocksPerRow(shape.len);
    for (ElemFormat element : {ElemFormat::kFp8E4M3, ElemFormat::kFp8E5M2, ElemFormat::kFp6E3M2,
                               ElemFormat::kFp6E2M3, ElemFormat::kFp4E2M1, ElemFormat::kInt8}) {
      for (auto mode : {kernels::MxScaleMode::kEven, kernels::MxScaleMode::kFloor, kernels::MxScaleMode::kCeil}) {
        for (auto round : {kernels::RoundMode::kHalfEven, kernels::RoundMode::kHalfAway, kernels::RoundMode::kFloor}) {
          if (element != ElemFormat::kInt8 && round != kernels::RoundMode::kHalfEven) continue;
          // Ordinary blocks, and blocks so small (amax < 2^-121) that MXINT8 scales in two steps.
          for (float unit : {0.01f, 1e-38f}) {
            const kernels::MxArgs args{element, mode, round};
            // Static exponents (as from calibration) too: some far below a block's values, so elements saturate.
            const at::Tensor exps = at::randint(-20, 10, {blocks}, at::detail::createCPUGenerator(++seed), at::kChar);
            for (at::ScalarType dtype : kDtypes) {
              const at::Tensor x = Inputs(shape.rows * shape.len, seed, unit, dtype);
              const std::string what = "mx " + std::to_string(static_cast<int>(element)) + " " +
                                       c10::toString(dtype) + " [" + std::to_string(shape.rows) + "," +
                                       std::to_string(shape.len) + "] mode " + std::to_string(static_cast<int>(mode)) +
                                       " round " + std::to_string(static_cast<int>(round)) + " unit " +
                                       std::to_string(unit);
              for (bool given : {false, true}) {
                at::Tensor a = at::empty_like(x);
                at::Tensor b = at::empty_like(x);
                const at::Tensor e = given ? exps : at::Tensor();
                CpuQuantKernels().FakeMx(x, a, shape.rows, shape.len, args, e);
                TensorOpQuantKernels().FakeMx(x, b, shape.rows, shape.len, args, e);
                ExpectBitEqual(a, b, what + (given ? " static exponents" : ""));
              }
            }
          }
        }
      }
    }
  }
}

TEST(TensorOpKernelsTest, RangeReductionsAreTheCpuKernels) {
  uint64_t seed = 600;
  for (const ChannelLayout& l : kLayouts) {
    for (at::ScalarType dtype : kDtypes) {
      const at::Tensor x = Inputs(l.Numel(), ++seed, 1.0f, dtype);
      // Without NaN too: a NaN-free channel must give its true extremes, not just NaN.
      for (const at::Tensor& in : {x, at::nan_to_num(x, 0.0)}) {
        at::Tensor mn1, mx1, mn2, mx2;
        CpuQuantKernels().ChannelMinMax(in, l, mn1, mx1);
        TensorOpQuantKernels().ChannelMinMax(in, l, mn2, mx2);
        // Zeros may differ in sign (a -0 / +0 tie), which no parameter depends on: compare values, NaN equal.
        EXPECT_TRUE(at::allclose(mn1, mn2, 0.0, 0.0, /*equal_nan=*/true)) << "min " << Describe(l, dtype);
        EXPECT_TRUE(at::allclose(mx1, mx2, 0.0, 0.0, /*equal_nan=*/true)) << "max " << Describe(l, dtype);
        const int64_t len = l.inner * l.channels;
        at::Tensor a1, a2;
        CpuQuantKernels().MxBlockAmax(in, l.outer, len, a1);
        TensorOpQuantKernels().MxBlockAmax(in, l.outer, len, a2);
        EXPECT_TRUE(at::allclose(a1, a2, 0.0, 0.0, true)) << "mx amax " << Describe(l, dtype);
      }
    }
  }
}

TEST(TensorOpKernelsTest, EachDeviceGetsItsKernels) {
  EXPECT_EQ(QuantKernelsFor(at::Device(at::kCPU)).name(), "cpu");
  // CUDA tensors get the CUDA kernels where nvcc built them, the tensor ops otherwise; a device without kernels of
  // its own always gets the tensor ops. (Only the choice is looked at: no device tensor is made here.)
#if defined(QUARK_HAVE_CUDA_KERNELS)
  EXPECT_EQ(QuantKernelsFor(at::Device(at::kCUDA, 0)).name(), "cuda");
#else
  EXPECT_EQ(QuantKernelsFor(at::Device(at::kCUDA, 0)).name(), "tensor-ops");
#endif
  EXPECT_EQ(QuantKernelsFor(at::Device(at::kXPU, 0)).name(), "tensor-ops");
}

}  // namespace
}  // namespace quark::testing
