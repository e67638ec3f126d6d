// AsymmetricStats: GPTAQ's and Qronos's paired input statistics with Quark's calls in Quark's order
// (Gptaq.add_batch_quantized / add_batch_nonquantized; Qronos's the same names), one batch at a time.
#include <cmath>
#include <utility>

#include "core/algorithms/asymmetric_gptq.h"
#include "core/base/strings.h"
#include "core/runtime/layer_streamer.h"

namespace quark::algorithms {

AsymmetricStats::AsymmetricStats(HessianMethod method, int64_t columns) : method_(method), columns_(columns) {}

absl::Status AsymmetricStats::Add(const at::Tensor& quantized, const at::Tensor& original) {
  if (!quantized.defined() || !original.defined() || quantized.sizes() != original.sizes() ||
      quantized.dim() < 2 || quantized.size(-1) != columns_) {
    return absl::InvalidArgumentError(StrCat("input: expected two [..., ", columns_, "] tensors of one shape"));
  }
  try {
    const int64_t batch = quantized.dim() == 2 ? 1 : quantized.size(0);
    // [K, tokens], as Quark's reshape((-1, K)).t()
    at::Tensor xq = quantized.to(at::kFloat).reshape({-1, columns_}).t();
    at::Tensor x = original.to(at::kFloat).reshape({-1, columns_}).t();
    if (!h_.defined()) {
      h_ = at::zeros({columns_, columns_}, xq.options());
      cross_ = at::zeros({columns_, columns_}, xq.options());
    }
    sequences_ += batch;
    const double n = static_cast<double>(sequences_);
    const double keep = static_cast<double>(sequences_ - batch) / n;
    h_.mul_(keep);
    cross_.mul_(keep);
    if (method_ == HessianMethod::kGptaq) {
      // H = 2/n sum X~ X~^T; dXX = 2/n sum (X - X~) X~^T, both inputs scaled by sqrt(2/n) first.
      const double root = std::sqrt(2.0 / n);
      xq = xq.mul(root);
      h_.add_(xq.matmul(xq.t()));
      x = x.mul(root);
      cross_.add_((x - xq).matmul(xq.t()));
    } else {
      // H = 1/n sum X~ X~^T; G = 1/n sum X X~^T.
      h_.add_(xq.matmul(xq.t()).div(n));
      cross_.add_(x.matmul(xq.t()).div(n));
    }
    return absl::OkStatus();
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "asymmetric statistics");
  }
}

std::pair<at::Tensor, at::Tensor> AsymmetricStats::Release() {
  return {std::exchange(h_, at::Tensor()), std::exchange(cross_, at::Tensor())};
}

}  // namespace quark::algorithms
