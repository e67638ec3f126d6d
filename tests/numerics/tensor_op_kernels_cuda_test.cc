// The tensor-op kernels on CUDA tensors (what QuantKernelsFor gives a CUDA tensor when no CUDA kernel library is
// registered) against the vectorized CPU kernels on the same values on the CPU, bit for bit: integer, small-float and
// MX fake quantization in every rounding mode, float32 / bfloat16 / float16, odd sizes, ties, NaN, +-Inf, -0 and
// subnormals; and the min/max and MX amax reductions. Labelled `gpu`; skips, saying so, where LibTorch sees no CUDA
// device (a CPU-only LibTorch, or a machine without a GPU).
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <string>

#include "core/numerics/quant_kernels.h"
#include "kernels/cpu/format_traits.h"
#include "tests/numerics/tensor_op_test_inputs.h"
#include "tests/numerics/test_util.h"

namespace quark::testing {
namespace {

using kernels::ChannelLayout;
using kernels::ElemFormat;

class TensorOpKernelsCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) {
      // On a machine that has a GPU (scripts/gpu/run.sh sets QUARK_EXPECT_CUDA there), not seeing it is a failure:
      // e.g. a LibTorch linked without its CUDA library.
      if (std::getenv("QUARK_EXPECT_CUDA") != nullptr) FAIL() << "QUARK_EXPECT_CUDA is set but LibTorch sees no CUDA";
      GTEST_SKIP() << "LibTorch sees no CUDA device here (CPU-only LibTorch or no GPU): the tensor-op kernels were "
                      "not run on CUDA tensors";
    }
  }
  const at::Device cuda_{at::kCUDA, 0};
  at::Tensor Cuda(const at::Tensor& t) const { return t.defined() ? t.to(cuda_) : t; }
};

TEST_F(TensorOpKernelsCudaTest, AffineFakeQuantIsTheCpuKernelsBitForBit) {
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
          AffineKernelArgs on_device = args;
          on_device.scale = Cuda(args.scale);
          on_device.zero_point = Cuda(args.zero_point);
          for (at::ScalarType dtype : kTensorOpDtypes) {
            const at::Tensor x = TensorOpInputs(l.Numel(), seed, args.scale[0].item<float>(), dtype);
            at::Tensor a = at::empty_like(x);
            const at::Tensor dx = Cuda(x);
            at::Tensor b = at::empty_like(dx);
            CpuQuantKernels().FakeAffine(x, a, l, args);
            TensorOpQuantKernels().FakeAffine(dx, b, l, on_device);
            ExpectBitEqual(a, b, "cuda affine " + DescribeLayout(l, dtype) + " q[" + std::to_string(grid.qmin) +
                                     "," + std::to_string(grid.qmax) + "] round " +
                                     std::to_string(static_cast<int>(round)) + (float_zero ? " float zp" : ""));
          }
        }
      }
    }
  }
}

TEST_F(TensorOpKernelsCudaTest, FloatFormatFakeQuantIsTheCpuKernelsBitForBit) {
  uint64_t seed = 200;
  for (const ChannelLayout& l : kTensorOpLayouts) {
    for (ElemFormat format : {ElemFormat::kFp8E4M3, ElemFormat::kFp8E5M2, ElemFormat::kFp6E3M2, ElemFormat::kFp6E2M3,
                              ElemFormat::kFp4E2M1}) {
      const at::Tensor scale = at::rand({l.channels}, at::detail::createCPUGenerator(++seed)) * 0.5f + 0.01f;
      for (at::ScalarType dtype : kTensorOpDtypes) {
        const at::Tensor x =
            TensorOpInputs(l.Numel(), seed, scale[0].item<float>() * kernels::Traits(format).max / 16, dtype);
        at::Tensor a = at::empty_like(x);
        const at::Tensor dx = Cuda(x);
        at::Tensor b = at::empty_like(dx);
        CpuQuantKernels().FakeFloat(x, a, l, scale, format);
        TensorOpQuantKernels().FakeFloat(dx, b, l, Cuda(scale), format);
        ExpectBitEqual(a, b, "cuda " + std::string(kernels::Traits(format).name) + " " + DescribeLayout(l, dtype));
      }
    }
  }
}

TEST_F(TensorOpKernelsCudaTest, MxFakeQuantIsTheCpuKernelsBitForBit) {
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
          for (float unit : {0.01f, 1e-38f}) {
            const kernels::MxArgs args{element, mode, round};
            const at::Tensor exps = at::randint(-20, 10, {blocks}, at::detail::createCPUGenerator(++seed), at::kChar);
            for (at::ScalarType dtype : kTensorOpDtypes) {
              const at::Tensor x = TensorOpInputs(shape.rows * shape.len, seed, unit, dtype);
              const std::string what = "cuda mx " + std::to_string(static_cast<int>(element)) + " " +
                                       c10::toString(dtype) + " [" + std::to_string(shape.rows) + "," +
                                       std::to_string(shape.len) + "] mode " + std::to_string(static_cast<int>(mode)) +
                                       " round " + std::to_string(static_cast<int>(round)) + " unit " +
                                       std::to_string(unit);
              for (bool given : {false, true}) {
                at::Tensor a = at::empty_like(x);
                const at::Tensor dx = Cuda(x);
                at::Tensor b = at::empty_like(dx);
                const at::Tensor e = given ? exps : at::Tensor();
                CpuQuantKernels().FakeMx(x, a, shape.rows, shape.len, args, e);
                TensorOpQuantKernels().FakeMx(dx, b, shape.rows, shape.len, args, Cuda(e));
                ExpectBitEqual(a, b, what + (given ? " static exponents" : ""));
              }
            }
          }
        }
      }
    }
  }
}

TEST_F(TensorOpKernelsCudaTest, RangeReductionsAreTheCpuKernels) {
  uint64_t seed = 600;
  for (const ChannelLayout& l : kTensorOpLayouts) {
    for (at::ScalarType dtype : kTensorOpDtypes) {
      const at::Tensor x = TensorOpInputs(l.Numel(), ++seed, 1.0f, dtype);
      for (const at::Tensor& in : {x, at::nan_to_num(x, 0.0)}) {
        at::Tensor mn1, mx1, mn2, mx2;
        CpuQuantKernels().ChannelMinMax(in, l, mn1, mx1);
        TensorOpQuantKernels().ChannelMinMax(Cuda(in), l, mn2, mx2);
        // The results are CPU tensors whatever the data's device (quant_kernels.h); zeros may differ in sign.
        EXPECT_TRUE(mn2.device().is_cpu() && mx2.device().is_cpu()) << "min/max device " << DescribeLayout(l, dtype);
        EXPECT_TRUE(at::allclose(mn1, mn2.cpu(), 0.0, 0.0, /*equal_nan=*/true)) << "min " << DescribeLayout(l, dtype);
        EXPECT_TRUE(at::allclose(mx1, mx2.cpu(), 0.0, 0.0, /*equal_nan=*/true)) << "max " << DescribeLayout(l, dtype);
        const int64_t len = l.inner * l.channels;
        at::Tensor a1, a2;
        CpuQuantKernels().MxBlockAmax(in, l.outer, len, a1);
        TensorOpQuantKernels().MxBlockAmax(Cuda(in), l.outer, len, a2);
        EXPECT_TRUE(at::allclose(a1, a2.cpu(), 0.0, 0.0, true)) << "mx amax " << DescribeLayout(l, dtype);
      }
    }
  }
}

}  // namespace
}  // namespace quark::testing
