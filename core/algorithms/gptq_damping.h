// What both GPTQ paths (gptq.cc: LAPACK on host memory; gptq_tensor_ops.cc: LibTorch's linalg on any device) do to a
// Hessian before and around its factorisation: the working copy with its checks and dead inputs, and Quark's damping
// and retries around the two factorisation steps each path supplies.
#pragma once

#include <functional>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"

namespace quark::algorithms {

/// The Hessian GPTQ factors in place: `hessian` itself when nobody else holds it (float32, contiguous: K x K is 0.5 GB
/// for an 11008-wide input), else a float32 copy. FAILED_PRECONDITION when an entry is NaN or infinite. Inputs no
/// calibration token reached (a zero diagonal) are returned in `dead` and get 1 on the diagonal, as in Quark.
absl::StatusOr<at::Tensor> WorkingHessian(at::Tensor hessian, at::Tensor& dead);

/// `first(h)`: factors h; on success it may consume h, on failure (FAILED_PRECONDITION: not positive definite) it
/// leaves h as it was. `second(factor)`: the upper factor of the inverse from the first step's factor.
struct TwoStepFactorisation {
  std::function<absl::StatusOr<at::Tensor>(at::Tensor& h)> first;
  std::function<absl::StatusOr<at::Tensor>(at::Tensor factor)> second;
};

/// U^T U = (h + damp I)^-1 with damp = damp_percent * mean(diag h) added as Quark adds it (a float32 product of the
/// float32 mean), and when the first step fails Quark's five retries with ten times more diagonal each time (from
/// max(|damp|, 1e-6 * mean |diag|, float epsilon)), `extra_damp` set to what the successful retry added. Quark does
/// not retry a failed second step. h is damped in place.
absl::StatusOr<at::Tensor> DampedInverseFactor(at::Tensor& h, double damp_percent, const TwoStepFactorisation& steps,
                                               double& extra_damp);

}  // namespace quark::algorithms
