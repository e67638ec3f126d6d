// The tensor-op kernels (what a tensor on a device without kernels of its own runs) against the vectorized CPU
// kernels on CPU tensors, bit for bit: integer, small-float and MX fake quantization in every rounding mode, with
// integer and float zero points, per tensor / channel / element column / group layouts, float32 / bfloat16 / float16,
// odd sizes, ties, NaN, +-Inf, -0 and subnormals; and the min/max and MX amax reductions (tensor_op_comparisons.h).
#include <gtest/gtest.h>

#include "core/numerics/quant_kernels.h"
#include "tests/numerics/tensor_op_comparisons.h"

namespace quark::testing {
namespace {

const at::Device kCpu(at::kCPU);

TEST(TensorOpKernelsTest, AffineFakeQuantIsTheCpuKernelsBitForBit) { CompareAffineFakeQuant(kCpu); }

TEST(TensorOpKernelsTest, FloatFormatFakeQuantIsTheCpuKernelsBitForBit) { CompareFloatFormatFakeQuant(kCpu); }

TEST(TensorOpKernelsTest, MxFakeQuantIsTheCpuKernelsBitForBit) { CompareMxFakeQuant(kCpu); }

TEST(TensorOpKernelsTest, RangeReductionsAreTheCpuKernels) { CompareRangeReductions(kCpu); }

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
