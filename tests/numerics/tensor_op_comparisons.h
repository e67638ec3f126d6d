// The comparisons of the tensor-op kernel tests, on any device: the vectorized CPU kernels run on CPU tensors, the
// tensor-op kernels on copies of the same values on `device` (the CPU itself in tensor_op_kernels_test, a GPU in
// tensor_op_kernels_cuda_test), and every result must have the CPU's bits. Each adds a failure naming the first case
// and element that differ.
#pragma once

#include <ATen/ATen.h>

namespace quark::testing {

/// Integer fake quantization: every grid, rounding mode, integer and float zero point, layout and dtype.
void CompareAffineFakeQuant(const at::Device& device);
/// fp8 / fp6 / fp4 with a scale per channel, column or group.
void CompareFloatFormatFakeQuant(const at::Device& device);
/// MX: every element type and scale mode (MXINT8: every rounding), exponents from the blocks and given ones, blocks
/// of ordinary values and blocks small enough for MXINT8's two-step scaling.
void CompareMxFakeQuant(const at::Device& device);
/// Channel min/max and MX block amax (values equal, NaN in the same places; zeros may differ in sign, which no
/// parameter depends on); the results are CPU tensors whatever the data's device.
void CompareRangeReductions(const at::Device& device);

}  // namespace quark::testing
