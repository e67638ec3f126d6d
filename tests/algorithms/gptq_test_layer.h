// The correlated layer the GPTQ tests quantize (gptq_test, gptq_formats_test) and the error they compare.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include <ATen/ATen.h>

#include "core/algorithms/gptq.h"
#include "core/algorithms/hessian.h"

namespace quark::algorithms::testing {

// A layer and calibration inputs that, like real activations, are correlated across channels (low rank plus noise;
// with independent channels H is nearly diagonal and GPTQ has nothing to correct) and have outlier channels.
struct Layer {
  at::Tensor weight;  // [N, K]
  at::Tensor inputs;  // [T, K]
  at::Tensor hessian;
};

inline Layer MakeLayer(int64_t n, int64_t k, int64_t tokens, uint64_t seed) {
  at::manual_seed(seed);
  Layer layer;
  layer.weight = at::randn({n, k}) * 0.02;
  const at::Tensor channel_scale = at::exp(at::randn({k}) * 0.8);
  const int64_t rank = std::max<int64_t>(4, k / 8);
  layer.inputs = (at::matmul(at::randn({tokens, rank}), at::randn({rank, k})) + 0.3 * at::randn({tokens, k})) *
                 channel_scale;
  HessianAccumulator h(k);
  EXPECT_TRUE(h.Add(layer.inputs.unsqueeze(0)).ok());
  layer.hessian = *std::move(h).Finish();
  return layer;
}

/// ||X W^T - X Q^T||^2 / ||X W^T||^2 in double.
inline double RelativeOutputError(const Layer& l, const at::Tensor& q) {
  const at::Tensor ref = at::matmul(l.inputs, l.weight.t()).to(at::kDouble);
  return (ref - at::matmul(l.inputs, q.t()).to(at::kDouble)).pow(2).sum().item<double>() / ref.pow(2).sum().item<double>();
}

/// The references' start, as Quark writes it: with act order, w's columns and h permuted by diag(h) descending; then
/// the upper Cholesky factor of the damped inverse Hessian (cholesky -> cholesky_inverse -> upper cholesky). Returns
/// the permutation (permuted position -> original column; the identity without act order) and the factor.
inline std::pair<at::Tensor, at::Tensor> ReferenceOrderAndFactor(at::Tensor& w, at::Tensor& h, const GptqOptions& o) {
  at::Tensor perm = at::arange(w.size(1));
  if (o.act_order) {
    perm = at::argsort(at::diag(h), 0, /*descending=*/true);
    w = w.index_select(1, perm);
    h = h.index_select(0, perm).index_select(1, perm);
  }
  h.diagonal().add_(at::diag(h).mean() * o.damp_percent);
  return {perm, at::linalg_cholesky(at::cholesky_inverse(at::linalg_cholesky(h)), /*upper=*/true)};
}

}  // namespace quark::algorithms::testing
