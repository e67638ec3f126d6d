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

/// U, upper triangular with a positive diagonal, such that U^T U = h^-1, for a symmetric positive definite h
/// [K, K] float32. It equals Quark's cholesky(cholesky_inverse(cholesky(h)), upper=True) mathematically, computed as
/// one factorisation and one triangular inverse of the reversed matrix (half the flops):
///   J h J = L L^T  =>  h^-1 = (J L^-T J)(J L^-1 J), and J L^-1 J is upper.
/// FAILED_PRECONDITION when h is not positive definite (the caller adds damping and retries).
absl::StatusOr<at::Tensor> UpperCholeskyOfInverse(const at::Tensor& h);

/// The same factor by Quark's own three LibTorch calls, bit for bit what Quark computes on the same BLAS/LAPACK.
absl::StatusOr<at::Tensor> UpperCholeskyOfInverseAsQuark(const at::Tensor& h);

}  // namespace quark::algorithms
