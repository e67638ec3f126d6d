// GPTQ in tensor operations, on whatever device its tensors are on: the path a GPU runs (and the CPU too, for the
// parity tests and benchmarks, with GptqOptions::tensor_ops). It is AMD Quark's gptq.py, call for call, designed
// for a device that wants few large operations and no host round trips:
//
//   factor:  dead inputs, act order, damping, then Quark's three factorisations (linalg_cholesky, cholesky_inverse,
//            upper linalg_cholesky; cuSOLVER on a GPU), retried with more damping as the CPU path does;
//   columns: blocks of `block_size` columns; inside a block each column is rounded by the engine's fake quantizer
//            (the numerics' kernels for the weight's device: the CUDA kernels share the CPU's element math), its
//            error spread over the block's later columns as one outer product, and after the block one GEMM applies
//            the lazy update to every later column. Group parameters are observed on the current weight as each
//            group starts (static groups: from the original weight), as in Quark. The only host syncs are one per
//            weight (are there dead inputs?) and, with act order, reading the permutation.
//
// On the CPU every float operation is the one the optimized path (gptq.cc) performs, in the same order, so the two
// give the same bits (tests/algorithms/gptq_tensor_ops_test.cc); on a GPU the GEMMs sum in cuBLAS's order and the
// result moves within GPTQ's sensitivity to last-bit differences (docs/results.md).
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/gptq.h"

namespace quark::algorithms {

/// GptqFactorOf on the Hessian's device. Same contract.
absl::StatusOr<GptqFactor> GptqFactorByTensorOps(at::Tensor hessian, const GptqOptions& options);

/// GptqQuantizeWeight on the weight's device (the factor is moved there if it is elsewhere). Same contract; the
/// result's weight and parameters are on the weight's device.
absl::StatusOr<GptqResult> GptqQuantizeByTensorOps(const at::Tensor& weight, const GptqFactor& factor,
                                                   const QuantSpec& spec, const GptqOptions& options);

}  // namespace quark::algorithms
