#include "core/algorithms/gptq_damping.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/base/strings.h"

namespace quark::algorithms {
namespace {

// Quark retries the Cholesky factorisation five times, ten times more damping each time.
constexpr int kCholeskyRetries = 5;

}  // namespace

absl::StatusOr<at::Tensor> WorkingHessian(at::Tensor hessian, at::Tensor& dead) {
  const bool owned = hessian.use_count() == 1 && hessian.scalar_type() == at::kFloat && hessian.is_contiguous();
  at::Tensor h = owned ? std::move(hessian) : hessian.to(at::kFloat).clone().contiguous();
  // No damping makes a NaN or an infinity positive definite, and LAPACK reports them only by chance (OpenBLAS
  // 0.3.21's spotri/spotrf('U') happened to, 0.3.29's do not: GPTQ then "succeeded" with NaN weights). The extremes
  // are finite exactly when every entry is (NaN propagates through aminmax), and take no [K, K] temporary: a sum
  // in double converted the whole Hessian first (+537 MB at K = 8192, EstimateTest caught it).
  const auto [lowest, highest] = at::aminmax(h);
  if (!std::isfinite(lowest.item<float>()) || !std::isfinite(highest.item<float>())) {
    return absl::FailedPreconditionError("hessian: has NaN or infinite entries");
  }
  dead = h.diagonal() == 0;
  h.diagonal().masked_fill_(dead, 1);
  return h;
}

absl::StatusOr<at::Tensor> DampedInverseFactor(at::Tensor& h, double damp_percent, const TwoStepFactorisation& steps,
                                               double& extra_damp) {
  // As Quark: a float32 product of the float32 mean, added as a tensor (a double product would round differently).
  // at::diag copies the diagonal (contiguous), as torch.diag in Quark: a mean over the strided view sums in
  // another order.
  const at::Tensor damp = at::diag(h).mean() * damp_percent;
  h.diagonal().add_(damp);
  absl::StatusOr<at::Tensor> factor = steps.first(h);
  if (factor.ok()) return steps.second(*std::move(factor));  // Quark does not retry past this one
  // Quark's retry: more diagonal regularisation, ten times more each time, on the damped matrix.
  const at::Tensor damped_diagonal = h.diagonal().clone();
  double extra = std::max({std::abs(damp.item<double>()), damped_diagonal.abs().mean().item<double>() * 1e-6,
                           static_cast<double>(std::numeric_limits<float>::epsilon())});
  for (int attempt = 0; attempt < kCholeskyRetries; ++attempt, extra *= 10) {
    h.diagonal().copy_(damped_diagonal);
    h.diagonal().add_(extra);
    factor = steps.first(h);
    if (factor.ok()) {
      extra_damp = extra;
      return steps.second(*std::move(factor));
    }
  }
  return absl::FailedPreconditionError(StrCat(std::string(factor.status().message()), " after ", kCholeskyRetries,
                                              " retries with extra damping up to ", extra / 10));
}

}  // namespace quark::algorithms
