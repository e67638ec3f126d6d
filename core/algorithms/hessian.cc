#include "core/algorithms/hessian.h"

#include <algorithm>
#include <cmath>

#include "core/algorithms/linalg.h"
#include "core/base/strings.h"

namespace quark::algorithms {
namespace {

// Rows of X^T X per GEMM of the exact accumulation.
constexpr int64_t kPanelRows = 512;

}  // namespace

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
  // Quark's add_batch, call for call, except that only the lower triangle of X^T X is computed: in panels of rows,
  // each panel's GEMM with the columns up to its diagonal block. OpenBLAS sums every element over the tokens in the
  // same blocks whatever rows and columns a call is given (the blocking follows the shared dimension alone), so each
  // element has the bits of Quark's full GEMM at a little over half its flops; Finish mirrors the triangle.
  sum_.mul_(static_cast<double>(sequences_) / static_cast<double>(sequences_ + batch));
  sequences_ += batch;
  const double scale = std::sqrt(2.0 / static_cast<double>(sequences_));
  const at::Tensor inp = scale * x.reshape({-1, columns_}).t().to(at::kFloat);
  for (int64_t r0 = 0; r0 < columns_; r0 += kPanelRows) {
    const int64_t r1 = std::min(columns_, r0 + kPanelRows);
    sum_.slice(0, r0, r1).slice(1, 0, r1) += inp.slice(0, r0, r1).matmul(inp.slice(0, 0, r1).t());
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> HessianAccumulator::Finish() && {
  if (sequences_ == 0) return absl::FailedPreconditionError("hessian: no calibration input was seen");
  if (fast_) sum_.mul_(2.0 / static_cast<double>(sequences_));
  CompleteSymmetric(sum_, Triangle::kLower);
  return std::move(sum_);
}

}  // namespace quark::algorithms
