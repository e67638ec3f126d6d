#include "core/algorithms/cayley_sgd.h"

#include <algorithm>

namespace quark::algorithms {
namespace {

constexpr double kEpsilon = 1e-8;  // the reference's `episilon` and unit()'s eps

// QR of x^T with the signs of R's diagonal moved into Q, transposed back: x's rows made orthonormal again
// (the reference's qr_retraction).
at::Tensor QrRetraction(const at::Tensor& x) {
  auto [q, r] = at::linalg_qr(x.t());
  q = q * at::sign(at::diagonal(r)).unsqueeze(0);
  return q.t().contiguous();
}

}  // namespace

at::Tensor CayleySgd::Step(const at::Tensor& x_in, const at::Tensor& grad, double lr) {
  at::Tensor x = x_in.reshape({x_in.size(0), -1});
  x = x / (x.norm(2, /*dim=*/{1}, /*keepdim=*/true) + kEpsilon);
  if (std::uniform_int_distribution<int>(1, 101)(rng_) == 1) x = QrRetraction(x);
  const at::Tensor g = grad.reshape({grad.size(0), -1}).to(x.scalar_type());
  const at::Tensor v = -g.t();                   // [n, p]
  const at::Tensor mx = at::mm(v, x);            // [n, n]
  const at::Tensor xxmx = at::mm(x.t(), at::mm(x, mx));
  const at::Tensor w_hat = mx - 0.5 * xxmx;
  const at::Tensor w = w_hat - w_hat.t();        // skew-symmetric
  const double norm_one = w.abs().sum(0).max().item<double>();
  const double alpha = std::min(0.5 * 2 / (norm_one + kEpsilon), lr);
  const at::Tensor xt = x.t();
  at::Tensor y = xt + alpha * v;
  for (int i = 0; i < 5; ++i) y = xt + alpha * at::mm(w, 0.5 * (xt + y));
  return y.t().reshape(x_in.sizes()).contiguous();
}

}  // namespace quark::algorithms
