// Quark's damping of the GPTQ Hessian and its retries, around a factorisation in two steps that both GPTQ paths
// supply (gptq.cc: LAPACK on host memory; gptq_tensor_ops.cc: LibTorch's linalg on any device).
#pragma once

#include <functional>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"

namespace quark::algorithms {

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
