// The tensor-op kernels on CUDA tensors (LibTorch's CUDA ops running the element math) against the vectorized CPU
// kernels on the same values on the CPU, bit for bit: the comparisons of tensor_op_kernels_test with the tensor-op
// side on cuda:0 (tensor_op_comparisons.h). Labelled `gpu`; skips, saying so, where LibTorch sees no CUDA device (a
// CPU-only LibTorch, or a machine without a GPU).
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>

#include "tests/numerics/tensor_op_comparisons.h"
#include "tests/support/require_cuda.h"

namespace quark::testing {
namespace {

class TensorOpKernelsCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // On a machine with a GPU not seeing it is a failure (e.g. a LibTorch linked without its CUDA library).
    QUARK_REQUIRE_CUDA("the tensor-op kernels were not run on CUDA tensors");
  }
  const at::Device cuda_{at::kCUDA, 0};
};

TEST_F(TensorOpKernelsCudaTest, AffineFakeQuantIsTheCpuKernelsBitForBit) { CompareAffineFakeQuant(cuda_); }

TEST_F(TensorOpKernelsCudaTest, FloatFormatFakeQuantIsTheCpuKernelsBitForBit) { CompareFloatFormatFakeQuant(cuda_); }

TEST_F(TensorOpKernelsCudaTest, MxFakeQuantIsTheCpuKernelsBitForBit) { CompareMxFakeQuant(cuda_); }

TEST_F(TensorOpKernelsCudaTest, RangeReductionsAreTheCpuKernels) { CompareRangeReductions(cuda_); }

}  // namespace
}  // namespace quark::testing
