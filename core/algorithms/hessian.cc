#include "core/algorithms/hessian.h"

#include <cmath>

#include "core/algorithms/linalg.h"
#include "core/base/strings.h"

namespace quark::algorithms {

HessianAccumulator::HessianAccumulator(int64_t columns, bool fast)
    : columns_(columns), fast_(fast), sum_(at::zeros({columns, columns}, at::kFloat)) {}

absl::Status HessianAccumulator::Add(const at::Tensor& x) {
  if (!x.defined() || x.dim() < 1 || x.size(-1) != columns_) {
    return absl::InvalidArgumentError(StrCat("hessian input: expected [..., ", columns_, "], got ",
                                             x.defined() ? c10::str(x.sizes()) : std::string("none")));
  }
  const int64_t batch = x.dim() == 3 ? x.size(0) : 1;
  if (fast_) {
    sequences_ += batch;
    AddGram(sum_, x.reshape({-1, columns_}).to(at::kFloat));
    return absl::OkStatus();
  }
  // Quark's add_batch, call for call.
  sum_.mul_(static_cast<double>(sequences_) / static_cast<double>(sequences_ + batch));
  sequences_ += batch;
  const double scale = std::sqrt(2.0 / static_cast<double>(sequences_));
  const at::Tensor inp = scale * x.reshape({-1, columns_}).t().to(at::kFloat);
  sum_ += inp.matmul(inp.t());
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> HessianAccumulator::Finish() && {
  if (sequences_ == 0) return absl::FailedPreconditionError("hessian: no calibration input was seen");
  if (!fast_) return std::move(sum_);
  sum_.mul_(2.0 / static_cast<double>(sequences_));
  CompleteSymmetric(sum_, Triangle::kLower);
  return std::move(sum_);
}

}  // namespace quark::algorithms
