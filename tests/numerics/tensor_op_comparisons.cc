#include "tests/numerics/tensor_op_comparisons.h"

#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <vector>

#include "core/numerics/quant_kernels.h"
#include "kernels/cpu/format_traits.h"
#include "tests/numerics/tensor_op_test_inputs.h"

namespace quark::testing {
namespace {

using kernels::ChannelLayout;
using kernels::ElemFormat;

at::Tensor On(const at::Tensor& t, const at::Device& device) { return t.defined() ? t.to(device) : t; }

std::string Where(const at::Device& device) { return device.is_cpu() ? "" : device.str() + " "; }

constexpr ElemFormat kFloatFormats[] = {ElemFormat::kFp8E4M3, ElemFormat::kFp8E5M2, ElemFormat::kFp6E3M2,
                                        ElemFormat::kFp6E2M3, ElemFormat::kFp4E2M1};
constexpr kernels::RoundMode kRounds[] = {kernels::RoundMode::kHalfEven, kernels::RoundMode::kHalfAway,
                                          kernels::RoundMode::kFloor};

AffineKernelArgs AffineArgs(const ChannelLayout& l, const IntGrid& grid, kernels::RoundMode round, bool float_zero,
                            uint64_t seed) {
  AffineKernelArgs args;
  args.scale = at::rand({l.channels}, at::detail::createCPUGenerator(seed)) * 0.5f + 0.01f;
  const at::Tensor z = grid.qmin < 0 ? at::zeros({l.channels})
                                     : at::randint(grid.qmin, grid.qmax + 1, {l.channels},
                                                   at::detail::createCPUGenerator(seed), at::kFloat);
  args.zero_point = float_zero ? z + 0.37f : z;
  args.qmin = grid.qmin;
  args.qmax = grid.qmax;
  args.round = round;
  args.float_zero_point = float_zero;
  return args;
}

}  // namespace

void CompareAffineFakeQuant(const at::Device& device) {
  uint64_t seed = 10;
  for (const ChannelLayout& l : kTensorOpLayouts) {
    for (const IntGrid& grid : kTensorOpIntGrids) {
      for (kernels::RoundMode round : kRounds) {
        for (bool float_zero : {false, true}) {
          const AffineKernelArgs args = AffineArgs(l, grid, round, float_zero, ++seed);
          AffineKernelArgs on_device = args;
          on_device.scale = On(args.scale, device);
          on_device.zero_point = On(args.zero_point, device);
          for (at::ScalarType dtype : kTensorOpDtypes) {
            const at::Tensor x = TensorOpInputs(l.Numel(), seed, args.scale[0].item<float>(), dtype);
            at::Tensor a = at::empty_like(x);
            const at::Tensor dx = On(x, device);
            at::Tensor b = at::empty_like(dx);
            CpuQuantKernels().FakeAffine(x, a, l, args);
            TensorOpQuantKernels().FakeAffine(dx, b, l, on_device);
            ExpectBitEqual(a, b, Where(device) + "affine " + DescribeLayout(l, dtype) + " q[" +
                                     std::to_string(grid.qmin) + "," + std::to_string(grid.qmax) + "] round " +
                                     std::to_string(static_cast<int>(round)) + (float_zero ? " float zp" : ""));
          }
        }
      }
    }
  }
}

void CompareFloatFormatFakeQuant(const at::Device& device) {
  uint64_t seed = 200;
  for (const ChannelLayout& l : kTensorOpLayouts) {
    for (ElemFormat format : kFloatFormats) {
      const at::Tensor scale = at::rand({l.channels}, at::detail::createCPUGenerator(++seed)) * 0.5f + 0.01f;
      for (at::ScalarType dtype : kTensorOpDtypes) {
        const at::Tensor x =
            TensorOpInputs(l.Numel(), seed, scale[0].item<float>() * kernels::Traits(format).max / 16, dtype);
        at::Tensor a = at::empty_like(x);
        const at::Tensor dx = On(x, device);
        at::Tensor b = at::empty_like(dx);
        CpuQuantKernels().FakeFloat(x, a, l, scale, format);
        TensorOpQuantKernels().FakeFloat(dx, b, l, On(scale, device), format);
        ExpectBitEqual(a, b, Where(device) + std::string(kernels::Traits(format).name) + " " + DescribeLayout(l, dtype));
      }
    }
  }
}

void CompareMxFakeQuant(const at::Device& device) {
  uint64_t seed = 400;
  struct Shape {
    int64_t rows, len;
  };
  std::vector<ElemFormat> elements(std::begin(kFloatFormats), std::end(kFloatFormats));
  elements.push_back(ElemFormat::kInt8);  // MXINT8
  for (Shape shape : {Shape{1, 1}, Shape{1, 17}, Shape{3, 32}, Shape{2, 100}, Shape{4, 1025}}) {
    const int64_t blocks = shape.rows * kernels::MxBlocksPerRow(shape.len);
    for (ElemFormat element : elements) {
      for (auto mode : {kernels::MxScaleMode::kEven, kernels::MxScaleMode::kFloor, kernels::MxScaleMode::kCeil}) {
        for (kernels::RoundMode round : kRounds) {
          if (element != ElemFormat::kInt8 && round != kernels::RoundMode::kHalfEven) continue;
          // Ordinary blocks, and blocks so small (amax < 2^-121) that MXINT8 scales in two steps.
          for (float unit : {0.01f, 1e-38f}) {
            const kernels::MxArgs args{element, mode, round};
            // Static exponents (as from calibration) too: some far below a block's values, so elements saturate.
            const at::Tensor exps = at::randint(-20, 10, {blocks}, at::detail::createCPUGenerator(++seed), at::kChar);
            for (at::ScalarType dtype : kTensorOpDtypes) {
              const at::Tensor x = TensorOpInputs(shape.rows * shape.len, seed, unit, dtype);
              const std::string what = Where(device) + "mx " + std::to_string(static_cast<int>(element)) + " " +
                                       c10::toString(dtype) + " [" + std::to_string(shape.rows) + "," +
                                       std::to_string(shape.len) + "] mode " + std::to_string(static_cast<int>(mode)) +
                                       " round " + std::to_string(static_cast<int>(round)) + " unit " +
                                       std::to_string(unit);
              for (bool given : {false, true}) {
                at::Tensor a = at::empty_like(x);
                const at::Tensor dx = On(x, device);
                at::Tensor b = at::empty_like(dx);
                const at::Tensor e = given ? exps : at::Tensor();
                CpuQuantKernels().FakeMx(x, a, shape.rows, shape.len, args, e);
                TensorOpQuantKernels().FakeMx(dx, b, shape.rows, shape.len, args, On(e, device));
                ExpectBitEqual(a, b, what + (given ? " static exponents" : ""));
              }
            }
          }
        }
      }
    }
  }
}

void CompareRangeReductions(const at::Device& device) {
  uint64_t seed = 600;
  for (const ChannelLayout& l : kTensorOpLayouts) {
    for (at::ScalarType dtype : kTensorOpDtypes) {
      const at::Tensor x = TensorOpInputs(l.Numel(), ++seed, 1.0f, dtype);
      // Without NaN too: a NaN-free channel must give its true extremes, not just NaN.
      for (const at::Tensor& in : {x, at::nan_to_num(x, 0.0)}) {
        const std::string what = Where(device) + DescribeLayout(l, dtype);
        at::Tensor mn1, mx1, mn2, mx2;
        CpuQuantKernels().ChannelMinMax(in, l, mn1, mx1);
        TensorOpQuantKernels().ChannelMinMax(On(in, device), l, mn2, mx2);
        EXPECT_TRUE(mn2.device().is_cpu() && mx2.device().is_cpu()) << "min/max device " << what;
        EXPECT_TRUE(at::allclose(mn1, mn2.cpu(), 0.0, 0.0, /*equal_nan=*/true)) << "min " << what;
        EXPECT_TRUE(at::allclose(mx1, mx2.cpu(), 0.0, 0.0, /*equal_nan=*/true)) << "max " << what;
        const int64_t len = l.inner * l.channels;
        at::Tensor a1, a2;
        CpuQuantKernels().MxBlockAmax(in, l.outer, len, a1);
        TensorOpQuantKernels().MxBlockAmax(On(in, device), l.outer, len, a2);
        EXPECT_TRUE(at::allclose(a1, a2.cpu(), 0.0, 0.0, true)) << "mx amax " << what;
      }
    }
  }
}

}  // namespace quark::testing
