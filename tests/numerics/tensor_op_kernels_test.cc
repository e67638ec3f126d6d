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
#include "tests/numerics/tensor_op_test_inputs.h"
#include "tests/numerics/test_util.h"

namespace quark::testing {
namespace {

using kernels::ChannelLayout;
using kernels::ElemFormat;

TEST(TensorOpKernelsTest, AffineFakeQuantIsTheCpuKernelsBitForBit) {
  const QuantKernels& cpu = CpuQuantKernels();
  const QuantKernels& ops = TensorOpQuantKernels();
  uint64_t seed = 10;
  for (const ChannelLayout& l : kTensorOpLayouts) {
    for (const IntGrid& grid : kTensorOpIntGrids) {
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
          for (at::ScalarType dtype : kTensorOpDtypes) {
            const at::Tensor x = TensorOpInputs(l.Numel(), seed, args.scale[0].item<float>(), dtype);
            at::Tensor a = at::empty_like(x);
            at::Tensor b = at::empty_like(x);
            cpu.FakeAffine(x, a, l, args);
            ops.FakeAffine(x, b, l, args);
            ExpectBitEqual(a, b, "affine " + DescribeLayout(l, dtype) + " q[" + std::to_string(grid.qmin) + "," +
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
  for (const ChannelLayout& l : kTensorOpLayouts) {
    for (ElemFormat format : {ElemFormat::kFp8E4M3, ElemFormat::kFp8E5M2, ElemFormat::kFp6E3M2, ElemFormat::kFp6E2M3,
                              ElemFormat::kFp4E2M1}) {
      const at::Tensor scale = at::rand({l.channels}, at::detail::createCPUGenerator(++seed)) * 0.5f + 0.01f;
      for (at::ScalarType dtype : kTensorOpDtypes) {
        const at::Tensor x =
            TensorOpInputs(l.Numel(), seed, scale[0].item<float>() * kernels::Traits(format).max / 16, dtype);
        at::Tensor a = at::empty_like(x);
        at::Tensor b = at::empty_like(x);
        CpuQuantKernels().FakeFloat(x, a, l, scale, format);
        TensorOpQuantKernels().FakeFloat(x, b, l, scale, format);
        ExpectBitEqual(a, b, std::string(kernels::Traits(format).name) + " " + DescribeLayout(l, dtype));
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
            for (at::ScalarType dtype : kTensorOpDtypes) {
              const at::Tensor x = TensorOpInputs(shape.rows * shape.len, seed, unit, dtype);
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
  for (const ChannelLayout& l : kTensorOpLayouts) {
    for (at::ScalarType dtype : kTensorOpDtypes) {
      const at::Tensor x = TensorOpInputs(l.Numel(), ++seed, 1.0f, dtype);
      // Without NaN too: a NaN-free channel must give its true extremes, not just NaN.
      for (const at::Tensor& in : {x, at::nan_to_num(x, 0.0)}) {
        at::Tensor mn1, mx1, mn2, mx2;
        CpuQuantKernels().ChannelMinMax(in, l, mn1, mx1);
        TensorOpQuantKernels().ChannelMinMax(in, l, mn2, mx2);
        // Zeros may differ in sign (a -0 / +0 tie), which no parameter depends on: compare values, NaN equal.
        EXPECT_TRUE(at::allclose(mn1, mn2, 0.0, 0.0, /*equal_nan=*/true)) << "min " << DescribeLayout(l, dtype);
        EXPECT_TRUE(at::allclose(mx1, mx2, 0.0, 0.0, /*equal_nan=*/true)) << "max " << DescribeLayout(l, dtype);
        const int64_t len = l.inner * l.channels;
        at::Tensor a1, a2;
        CpuQuantKernels().MxBlockAmax(in, l.outer, len, a1);
        TensorOpQuantKernels().MxBlockAmax(in, l.outer, len, a2);
        EXPECT_TRUE(at::allclose(a1, a2, 0.0, 0.0, true)) << "mx amax " << DescribeLayout(l, dtype);
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
