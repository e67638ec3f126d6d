// The float64 check of a GPTQ Hessian where its bits cannot be Quark's (#33 item 0): on OpenBLAS kernels other than
// the AVX-512 ones (Haswell, Zen, Sandybridge, generic cores) a GEMM's bits depend on a product's place in the call
// (edge tiles round differently), so a triangle computed in panels and mirrored, or a symmetric rank-k update, has
// other last bits than Quark's one full GEMM, whose own X^T X is then not even symmetric. There the engine's H must
// (1) lie within the worst-case rounding bound of a float32 sum of Quark's recurrence around the float64 H, and
// (2) be about as close to the float64 H as Quark's own float32 H is.
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace quark::algorithms::testing {

/// Quark's add_batch recurrence over `batches` ([B, T, K] or [T, K], B sequences each) in float64: the H itself
/// (first) and the elementwise magnitude 2/n * sum |x|^T |x| that bounds its rounding (second).
inline std::pair<at::Tensor, at::Tensor> HessianInFloat64(const std::vector<at::Tensor>& batches) {
  const int64_t k = batches.front().size(-1);
  at::Tensor h = at::zeros({k, k}, at::kDouble), magnitude = at::zeros({k, k}, at::kDouble);
  int64_t n = 0;
  for (const at::Tensor& x : batches) {
    const int64_t b = x.dim() == 3 ? x.size(0) : 1;
    const at::Tensor t = x.reshape({-1, k}).to(at::kDouble);
    h *= static_cast<double>(n) / static_cast<double>(n + b);
    magnitude *= static_cast<double>(n) / static_cast<double>(n + b);
    n += b;
    h += (2.0 / static_cast<double>(n)) * t.t().matmul(t);
    magnitude += (2.0 / static_cast<double>(n)) * t.abs().t().matmul(t.abs());
  }
  return {h, magnitude};
}

/// Success when |h - H64| <= (T + 32) u |magnitude| elementwise (T the most tokens of a batch, u = 2^-24: the
/// classic bound of a float32 dot product of length T, with room for the scalings and the adds between batches)
/// and the largest error relative to the magnitude is at most 4x that of `quark` (Quark's own float32 H).
inline ::testing::AssertionResult WithinFloat32Bound(const at::Tensor& h, const at::Tensor& quark,
                                                     const std::vector<at::Tensor>& batches) {
  const auto [exact, magnitude] = HessianInFloat64(batches);
  int64_t tokens = 0;
  for (const at::Tensor& x : batches) tokens = std::max<int64_t>(tokens, x.numel() / x.size(-1));
  const double gamma = static_cast<double>(tokens + 32) * std::ldexp(1.0, -24);
  const at::Tensor error = (h.to(at::kDouble) - exact).abs();
  const int64_t outside = (error > gamma * magnitude).sum().item<int64_t>();
  const double scale = magnitude.max().item<double>();
  const double ours = error.max().item<double>() / scale;
  const double quarks = (quark.to(at::kDouble) - exact).abs().max().item<double>() / scale;
  std::ostringstream text;
  text << outside << " values outside the float32 bound (gamma " << gamma << "); largest error / largest magnitude "
       << ours << ", Quark's float32 H " << quarks;
  if (outside > 0 || ours > 4 * quarks) return ::testing::AssertionFailure() << text.str();
  return ::testing::AssertionSuccess() << text.str();
}

}  // namespace quark::algorithms::testing
