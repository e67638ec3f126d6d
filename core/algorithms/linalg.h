// The dense linear algebra of the Hessian-based algorithms (GPTQ): Gram-matrix accumulation and the upper Cholesky
// factor of an inverse, on the system LAPACK/BLAS where the build found them (OpenBLAS on Debian), else on
// LibTorch's generic ops. float32 throughout, as Quark computes them.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"

namespace quark::algorithms {

/// sum += x^T x for x [T, K] (float32, any strides), sum [K, K] float32 contiguous. Only the LOWER triangle of `sum`
/// is maintained (a symmetric rank-k update does half the work of a GEMM); SymmetricFromLower completes it.
void AddGram(at::Tensor& sum, const at::Tensor& x);

/// The symmetric matrix whose lower triangle is `lower`'s.
at::Tensor SymmetricFromLower(const at::Tensor& lower);

/// The upper Cholesky factor of an inverse, U^T U = h^-1 for a symmetric positive definite h [K, K] float32, in two
/// steps so that the caller can release h (or keep it to retry with more damping) between them:
///   CholeskyStep: FAILED_PRECONDITION when h is not positive definite; h is not modified.
///   InverseFactorStep: consumes the first step's factor; returns U with contiguous rows, or FAILED_PRECONDITION
///   when the inverse is not positive definite either (a NaN the first step let through).
/// Quark's way (fast = false) is its own three LibTorch calls, bit for bit what Quark computes on the same
/// BLAS/LAPACK: cholesky(h) -> cholesky_inverse -> cholesky(upper). The fast way is one factorisation and one
/// triangular inverse of the reversed matrix (half the flops, equal up to rounding):
///   J h J = L L^T  =>  h^-1 = (J L^-T J)(J L^-1 J), and J L^-1 J is upper.
absl::StatusOr<at::Tensor> CholeskyStep(const at::Tensor& h, bool fast);
absl::StatusOr<at::Tensor> InverseFactorStep(at::Tensor factor, bool fast);

/// Both steps (tests and benchmarks).
absl::StatusOr<at::Tensor> UpperCholeskyOfInverse(const at::Tensor& h, bool fast = false);

}  // namespace quark::algorithms
