// The dense products GPTAQ and Qronos add to GPTQ, as core/algorithms/asymmetric_gptq.cc computes them, in plain
// terms: the algorithm picks its way from these functions and the job estimator (core/estimate, no LibTorch) charges
// the flops of the same way.
#pragma once

#include <algorithm>
#include <cstdint>

namespace quark {

/// GPTAQ's P = alpha * triu_1(dXX L) L^T (L lower) is formed on square blocks of this many rows and columns: only the
/// blocks that can hold a nonzero of the triangular factors are multiplied (gptaq_products.h). A K of at most one
/// block is one GEMM per product: Quark's two calls, with their bits.
inline constexpr int64_t kTriangularProductBlock = 512;

/// The flops of P on those blocks, for a K x K dXX:
///   triu_1(dXX L): per block column [j1, j2), rows [0, j2) of dXX[:, j1:] L[j1:, j1:j2]
///   (that) L^T:    per block pair I <= J, T[I, i1:j2] L^T[i1:j2, J]
/// about K^3 / 3 each, against 2 K^3 each for Quark's two full GEMMs.
inline double GptaqPFlops(int64_t k, int64_t block = kTriangularProductBlock) {
  double flops = 0;
  for (int64_t j1 = 0; j1 < k; j1 += block) {
    const double j2 = static_cast<double>(std::min(j1 + block, k)), width = j2 - static_cast<double>(j1);
    flops += 2.0 * j2 * static_cast<double>(k - j1) * width;
  }
  for (int64_t i1 = 0; i1 < k; i1 += block) {
    const double rows = static_cast<double>(std::min(i1 + block, k) - i1);
    for (int64_t j1 = i1; j1 < k; j1 += block) {
      const int64_t j2 = std::min(j1 + block, k);
      flops += 2.0 * rows * static_cast<double>(j2 - i1) * static_cast<double>(j2 - j1);
    }
  }
  return flops;
}

/// Qronos's re-solve w_{>0} = W (G_{:, >0} A) for W [N, K] and A = (H_{>0,>0})^-1 [K - 1, K - 1]: Quark forms
/// G_{:, >0} A first (2 K (K-1)^2 + 2 N K (K-1) flops and a K x (K-1) temporary). With fewer rows than inputs,
/// (W G_{:, >0}) A is fewer flops (2 N K (K-1) + 2 N (K-1)^2) and an N x (K-1) temporary; the same sums grouped
/// otherwise, equal up to rounding.
inline bool QronosResolvesRowsFirst(int64_t n, int64_t k) { return n < k; }

inline double QronosResolveFlops(int64_t n, int64_t k) {
  const double rows = static_cast<double>(n), inputs = static_cast<double>(k), rest = inputs - 1;
  const double first = QronosResolvesRowsFirst(n, k) ? rows : inputs;
  return 2.0 * first * rest * rest + 2.0 * rows * inputs * rest;
}

}  // namespace quark
