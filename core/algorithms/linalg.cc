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

namespace {

absl::Status NotPositiveDefinite(int64_t minor) {
  return absl::FailedPreconditionError(StrCat("Hessian is not positive definite (leading minor ", minor, ")"));
}

}  // namespace

absl::StatusOr<at::Tensor> CholeskyStep(const at::Tensor& h, bool fast) {
  if (!fast) {
    auto [lower, info] = at::linalg_cholesky_ex(h);
    if (info.item<int>() != 0) return NotPositiveDefinite(info.item<int>());
    return lower;
  }
  // The reversed matrix J h J: reversing the whole row-major array reverses both axes.
  at::Tensor reversed = h.flip({0, 1}).contiguous();
#ifdef QUARK_HAVE_LAPACK
  // Symmetric, so the row-major array is also the column-major matrix; spotrf('L') leaves L in its column-major
  // lower triangle (the row-major upper one) and the input in the rest.
  const int n = static_cast<int>(h.size(0));
  int info = 0;
  spotrf_("L", &n, reversed.data_ptr<float>(), &n, &info, 1);
  if (info != 0) return NotPositiveDefinite(info);
  return reversed;
#else
  auto [lower, info] = at::linalg_cholesky_ex(reversed);
  if (info.item<int>() != 0) return NotPositiveDefinite(info.item<int>());
  return lower;
#endif
}

absl::StatusOr<at::Tensor> InverseFactorStep(at::Tensor factor, bool fast) {
  if (!fast) {
    at::Tensor inverse = at::cholesky_inverse(factor);
    factor = at::Tensor();  // one K x K matrix fewer at the peak
    auto [upper, info] = at::linalg_cholesky_ex(inverse, /*upper=*/true);
    inverse = at::Tensor();
    if (info.item<int>() != 0) {
      return absl::FailedPreconditionError(StrCat("inverse Hessian is not positive definite (leading minor ",
                                                  info.item<int>(), ")"));
    }
    // Quark keeps the factor's own (column-major) strides; the lazy updates' GEMM sums the same products in the same
    // order from contiguous rows (checked: equal errors to the last digit), and the column loop needs the rows.
    return upper.contiguous();
  }
#ifdef QUARK_HAVE_LAPACK
  // strtri('L') turns the column-major lower L into L^-1: the row-major array holds (L^-1)^T above its diagonal.
  const int n = static_cast<int>(factor.size(0));
  int info = 0;
  strtri_("L", "N", &n, factor.data_ptr<float>(), &n, &info, 1, 1);
  if (info != 0) return absl::FailedPreconditionError(StrCat("Cholesky factor is singular at ", info));
  // U = J L^-1 J = (J (L^-1)^T J)^T.
  return factor.flip({0, 1}).t().triu().contiguous();
#else
  const at::Tensor identity = at::eye(factor.size(0), factor.options());
  const at::Tensor inverse = at::linalg_solve_triangular(factor, identity, /*upper=*/false);
  return inverse.flip({0, 1}).contiguous();
#endif
}

absl::StatusOr<at::Tensor> UpperCholeskyOfInverse(const at::Tensor& h, bool fast) {
  auto factor = CholeskyStep(h, fast);
  if (!factor.ok()) return factor.status();
  return InverseFactorStep(*std::move(factor), fast);
}

}  // namespace quark::algorithms
