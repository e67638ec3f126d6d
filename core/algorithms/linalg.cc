#include "core/algorithms/linalg.h"

#include <string>

#include "core/base/strings.h"

#ifdef QUARK_HAVE_LAPACK
// Fortran BLAS/LAPACK entry points (column-major; every argument by pointer; hidden string lengths last).
extern "C" {
void ssyrk_(const char* uplo, const char* trans, const int* n, const int* k, const float* alpha, const float* a,
            const int* lda, const float* beta, float* c, const int* ldc, size_t uplo_len, size_t trans_len);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t uplo_len);
void strtri_(const char* uplo, const char* diag, const int* n, float* a, const int* lda, int* info, size_t uplo_len,
             size_t diag_len);
}
#endif

namespace quark::algorithms {

void AddGram(at::Tensor& sum, const at::Tensor& x) {
  const at::Tensor a = x.contiguous();
#ifdef QUARK_HAVE_LAPACK
  // Row-major x [T, K] is column-major x^T [K, T]: C := x^T x is syrk(trans 'N') on it. Column-major 'U' is the
  // row-major lower triangle.
  const int n = static_cast<int>(a.size(1)), k = static_cast<int>(a.size(0));
  const float alpha = 1.0f, beta = 1.0f;
  if (n > 0 && k > 0) {
    ssyrk_("U", "N", &n, &k, &alpha, a.data_ptr<float>(), &n, &beta, sum.data_ptr<float>(), &n, 1, 1);
  }
#else
  sum.addmm_(a.t(), a);
#endif
}

at::Tensor SymmetricFromLower(const at::Tensor& lower) {
  const at::Tensor l = lower.tril();
  return (l + l.tril(-1).t()).contiguous();
}

absl::StatusOr<at::Tensor> UpperCholeskyOfInverseAsQuark(const at::Tensor& h) {
  auto [lower, info] = at::linalg_cholesky_ex(h);
  if (info.item<int>() != 0) {
    return absl::FailedPreconditionError(
        StrCat("Hessian is not positive definite (leading minor ", info.item<int>(), ")"));
  }
  auto [upper, upper_info] = at::linalg_cholesky_ex(at::cholesky_inverse(lower), /*upper=*/true);
  if (upper_info.item<int>() != 0) return absl::FailedPreconditionError("inverse Hessian is not positive definite");
  // Quark keeps the factor's own strides (its comment: results change slightly with a contiguous copy): the lazy
  // updates' GEMM reads it with them.
  return upper;
}

absl::StatusOr<at::Tensor> UpperCholeskyOfInverse(const at::Tensor& h) {
  const int64_t size = h.size(0);

  // The reversed matrix J h J: reversing the whole row-major array reverses both axes.
  at::Tensor reversed = h.flip({0, 1}).contiguous();
#ifdef QUARK_HAVE_LAPACK
  // Symmetric, so the row-major array is also the column-major matrix. After spotrf('L') + strtri('L') its
  // column-major lower triangle holds L^-1, i.e. the row-major array holds (L^-1)^T in its upper triangle and the
  // untouched input below it.
  const int n = static_cast<int>(size);
  int info = 0;
  spotrf_("L", &n, reversed.data_ptr<float>(), &n, &info, 1);
  if (info != 0) {
    return absl::FailedPreconditionError(StrCat("Hessian is not positive definite (leading minor ", info, ")"));
  }
  strtri_("L", "N", &n, reversed.data_ptr<float>(), &n, &info, 1, 1);
  if (info != 0) return absl::FailedPreconditionError(StrCat("Cholesky factor is singular at ", info));
  // U = J L^-1 J = (J (L^-1)^T J)^T.
  return reversed.flip({0, 1}).t().triu().contiguous();
#else
  auto [lower, info] = at::linalg_cholesky_ex(reversed);
  if (info.item<int>() != 0) {
    return absl::FailedPreconditionError(
        StrCat("Hessian is not positive definite (leading minor ", info.item<int>(), ")"));
  }
  const at::Tensor inverse = at::linalg_solve_triangular(lower, at::eye(size, h.options()), /*upper=*/false);
  return inverse.flip({0, 1}).contiguous();
#endif
}

}  // namespace quark::algorithms
