// SGD on the Stiefel manifold with the Cayley retraction (SGD-G of Li, Fuxin & Todorovic, "Efficient Riemannian
// optimization on the Stiefel manifold via the Cayley transform", ICLR 2020): the optimizer SpinQuant trains its R1/R2
// with (facebookresearch/SpinQuant train_utils/optimizer.py, SGDG with stiefel=True), which AMD Quark ships unchanged
// as quark/torch/algorithm/rotation/cayley.py. A step keeps the matrix orthogonal up to the fixed-point iteration's
// rounding, so a rotation trained with it can still be folded into the weights.
#pragma once

#include <cstdint>
#include <random>

#include <ATen/ATen.h>

namespace quark::algorithms {

/// The state of one trained matrix. Momentum is not kept: SpinQuant and Quark construct SGDG with momentum 0 (and
/// their momentum buffer is rebound, never written back), so a step depends on the gradient only.
class CayleySgd {
 public:
  /// `seed` draws SGDG's occasional QR re-orthonormalisation (probability 1/101 per step, as random.randint(1, 101)
  /// == 1 in the reference), seeded here so a run is reproducible.
  explicit CayleySgd(uint64_t seed) : rng_(seed) {}

  /// One step of x ([p, n], p <= n, rows orthonormal; float32 or float64) along -grad with learning rate `lr`:
  ///   x <- rows of x normalised (and, with probability 1/101, re-orthonormalised by QR with sign fix)
  ///   V = -grad^T; M = V x; W^ = M - 0.5 x^T (x M); W = W^ - W^^T (skew-symmetric, [n, n])
  ///   alpha = min(lr, 1 / (||W||_1 + 1e-8))      (||.||_1: the largest absolute column sum)
  ///   Y = x^T + alpha V, then 5 times Y = x^T + alpha W (x^T + Y) / 2; the new x is Y^T.
  /// Returns the new matrix (same dtype as x); x and grad are not modified.
  at::Tensor Step(const at::Tensor& x, const at::Tensor& grad, double lr);

 private:
  std::mt19937_64 rng_;
};

}  // namespace quark::algorithms
