// AsymmetricStats: GPTAQ's and Qronos's paired input statistics with Quark's calls in Quark's order
// (Gptaq.add_batch_quantized / add_batch_nonquantized; Qronos's the same names), one batch at a time.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/algorithms/asymmetric_gptq.h"
#include "core/base/strings.h"
#include "core/runtime/layer_streamer.h"

namespace quark::algorithms {
namespace {

// Rows of a batch's K x K product formed at a time: the sum takes its product a slab of rows at a time, so that no
// third K x K matrix (485 MB at K = 11008) joins H and the cross statistic. Each element is the same dot product
// over the batch's tokens as in the whole GEMM (one call when K fits a slab: Quark's, bit for bit).
constexpr int64_t kProductRows = 1024;

// sum += a b^T (divided by `divisor` first when it is not 1, as Quark's product.div(n)), for a, b [K, tokens].
void AddProduct(at::Tensor& sum, const at::Tensor& a, const at::Tensor& b, double divisor) {
  const at::Tensor bt = b.t();
  for (int64_t r = 0; r < sum.size(0); r += kProductRows) {
    const int64_t end = std::min(r + kProductRows, sum.size(0));
    at::Tensor product = a.slice(0, r, end).matmul(bt);
    if (divisor != 1) product = product.div(divisor);
    sum.slice(0, r, end).add_(product);
  }
}

}  // namespace

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
      AddProduct(h_, xq, xq, 1);
      x = x.mul(root);
      AddProduct(cross_, x - xq, xq, 1);
    } else {
      // H = 1/n sum X~ X~^T; G = 1/n sum X X~^T.
      AddProduct(h_, xq, xq, n);
      AddProduct(cross_, x, xq, n);
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
