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

HessianAccumulator::HessianAccumulator(int64_t columns, bool fast, bool tensor_ops)
    : columns_(columns), fast_(fast), tensor_ops_(tensor_ops) {}

absl::Status HessianAccumulator::Add(const at::Tensor& x) {
  if (!x.defined() || x.dim() < 1 || x.size(-1) != columns_) {
    return absl::InvalidArgumentError(StrCat("hessian input: expected [..., ", columns_, "], got ",
                                             x.defined() ? c10::str(x.sizes()) : std::string("none")));
  }
  const int64_t batch = x.dim() == 3 ? x.size(0) : 1;
  const at::Tensor tokens = x.reshape({-1, columns_});
  // The first batch writes the sum instead of adding to zeros: the same bits (0 + s is s, and no GEMM sum is -0),
  // without zeroing K x K floats first. Without tokens there is nothing to write over.
  const bool first = sequences_ == 0;
  if (first) on_device_ = tensor_ops_ || !x.device().is_cpu();
  if (on_device_) return AddByTensorOps(tokens, batch);
  if (first) {
    sum_ = tokens.size(0) == 0 ? at::zeros({columns_, columns_}, at::kFloat)
                               : at::empty({columns_, columns_}, at::kFloat);
  }
  if (fast_) {
    sequences_ += batch;
    AddGram(sum_, tokens.to(at::kFloat), first ? 0.0 : 1.0);
    return absl::OkStatus();
  }
  // Quark's add_batch, call for call, except that only the lower triangle of X^T X is computed: in panels of rows,
  // each panel's GEMM with the columns up to its diagonal block. OpenBLAS sums every element over the tokens in the
  // same blocks whatever rows and columns a call is given (the blocking follows the shared dimension alone), so each
  // element has the bits of Quark's full GEMM at a little over half its flops; Finish mirrors the triangle.
  // Quark's H *= n / (n + b) is 0 * 0 on the first batch, and its H += X^T X is 0 + X^T X: the first batch's GEMM
  // writes H itself. Later ones go through a product first: a GEMM accumulating into H would add each block of
  // tokens to H in turn instead of adding their sum. Where a symmetric rank-k update has the GEMM's bits (with
  // more than one BLAS thread), the first batch is one such update: the lower triangle alone, in one call.
  if (!first) sum_.mul_(static_cast<double>(sequences_) / static_cast<double>(sequences_ + batch));
  sequences_ += batch;
  const double scale = std::sqrt(2.0 / static_cast<double>(sequences_));
  const at::Tensor inp = scale * tokens.t().to(at::kFloat);
  if (first && GramHasThreadedGemmBits(columns_, tokens.size(0))) {
    AddGram(sum_, inp.t(), /*beta=*/0.0);
    return absl::OkStatus();
  }
  for (int64_t r0 = 0; r0 < columns_; r0 += kPanelRows) {
    const int64_t r1 = std::min(columns_, r0 + kPanelRows);
    at::Tensor panel = sum_.slice(0, r0, r1).slice(1, 0, r1);
    const at::Tensor rows = inp.slice(0, r0, r1), columns = inp.slice(0, 0, r1).t();
    if (first) {
      panel.addmm_(rows, columns, /*beta=*/0, /*alpha=*/1);
    } else {
      panel += rows.matmul(columns);
    }
  }
  return absl::OkStatus();
}

absl::Status HessianAccumulator::AddByTensorOps(const at::Tensor& tokens, int64_t batch) {
  // Quark's add_batch, call for call, on the input's device: one full GEMM a batch (a GPU has no use for the
  // triangle's saved flops at the price of more, smaller calls).
  if (sequences_ == 0) {
    sum_ = at::zeros({columns_, columns_}, tokens.options().dtype(at::kFloat));
  } else if (tokens.device() != sum_.device()) {
    return absl::InvalidArgumentError(StrCat("hessian input: on ", tokens.device().str(), ", the sum is on ",
                                             sum_.device().str()));
  }
  sum_.mul_(static_cast<double>(sequences_) / static_cast<double>(sequences_ + batch));
  sequences_ += batch;
  const at::Tensor inp = std::sqrt(2.0 / static_cast<double>(sequences_)) * tokens.t().to(at::kFloat);
  sum_ += inp.matmul(inp.t());
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> HessianAccumulator::Finish() && {
  if (sequences_ == 0) return absl::FailedPreconditionError("hessian: no calibration input was seen");
  if (on_device_) return std::move(sum_);  // the whole matrix, scaled as it was summed
  CompleteSymmetric(sum_, Triangle::kLower, Writes::kAll);  // the upper triangle was never written
  // Scaled after the completion (the same bits in both triangles either way): scaling first would read the
  // never-written triangle's fresh pages, and the completion then fault them in again to write them.
  if (fast_) sum_.mul_(2.0 / static_cast<double>(sequences_));
  return std::move(sum_);
}

}  // namespace quark::algorithms
