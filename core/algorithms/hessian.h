// The GPTQ Hessian of a linear's input: H = 2/n * sum over calibration sequences of X^T X (X [T, K] the sequence's
// inputs), n the number of sequences, as Quark's add_batch counts them (a [B, T, K] batch is B sequences).
//
// By default it is accumulated with Quark's own LibTorch calls in Quark's order (H *= n / (n + b); X *= sqrt(2 / n);
// H += X^T X as a GEMM, here in panels of the lower triangle that sum every element as the full GEMM does, or, for
// the first batch with more than one BLAS thread, one symmetric rank-k update, which then sums as that GEMM does), so
// H is bit for bit Quark's on the same BLAS. That matters: with fewer calibration
// tokens than input features H is singular before damping, and GPTQ amplifies last-bit differences of H (Quark's own
// result moves by 0.1% when its H is summed in another order; docs/results.md). `fast` sums half the matrix with a
// symmetric rank-k update instead: the same H up to rounding, in half the flops.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"

namespace quark::algorithms {

/// Not thread-safe.
class HessianAccumulator {
 public:
  /// `tensor_ops`: Quark's calls as they are (one GEMM into the whole matrix) on the input's device, the CPU's too;
  /// an input on another device (a GPU) always takes that way, and the sum stays on that device.
  explicit HessianAccumulator(int64_t columns, bool fast = false, bool tensor_ops = false);

  /// x [..., K] (float32 / bfloat16 / float16): x.size(0) sequences for 3-D input, one for 2-D.
  /// INVALID_ARGUMENT when the last dimension is not K.
  absl::Status Add(const at::Tensor& x);

  int64_t sequences() const { return sequences_; }
  int64_t columns() const { return columns_; }

  /// The symmetric H [K, K] float32, handed over without a copy (K x K can be 0.5 GB): the accumulator is spent.
  /// FAILED_PRECONDITION before the first Add.
  absl::StatusOr<at::Tensor> Finish() &&;

 private:
  absl::Status AddByTensorOps(const at::Tensor& tokens, int64_t batch);

  int64_t columns_;
  bool fast_;
  bool tensor_ops_;
  bool on_device_ = false;  // decided by the first Add
  int64_t sequences_ = 0;
  at::Tensor sum_;  // from the first Add; lower triangle: Quark: H itself; fast: the sum of X^T X
};

}  // namespace quark::algorithms
