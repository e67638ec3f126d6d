// GPTAQ (Li et al., 2025, arXiv:2504.02692) and Qronos (Zhang et al., 2025, arXiv:2505.11695) on one weight matrix,
// as AMD Quark 0.13 computes them (quark/torch/algorithm/gptaq/gptaq.py, qronos/qronos.py), in tensor operations on
// the weight's device, their column loops in GPTQ's fused blocks (gptq_fused_blocks.h; the same bits as column by
// column, GptqOptions::fused_blocks). Both calibrate asymmetrically: the statistics pair the input X~ the layer sees in the
// quantized model (its earlier layers and modules already quantized) with the input X the float model gives it.
//
//   GPTAQ:  H = 2/n sum X~ X~^T, dXX = 2/n sum (X - X~) X~^T; U = upper Cholesky factor of (H + damp I)^-1 (GPTQ's),
//           L = U^T, P = alpha * triu_1(dXX L) L^T; GPTQ's column loop in which each column's update also adds
//           w P[i, i:] (the float target's pull), in blocks with the lazy update W[:, i2:] -= E U - W1 P.
//   Qronos: H = 1/n sum X~ X~^T, G = 1/n sum X X~^T; damp = alpha * (largest eigenvalue of H by 30 power
//           iterations); the first column is rounded from the least-squares optimum (G w - H_{0,>0} w_{>0}) / H_00,
//           the rest re-solved with a Sherman-Morrison downdate of (H + damp I)^-1, then GPTQ's column loop on the
//           upper factor of beta * that inverse (divided by sqrt(beta)).
//
// Statistics are accumulated sequence by sequence in Quark's order with Quark's calls (AsymmetricStats; each batch's
// product added 1,024 rows at a time: the same dot products, no third K x K matrix), so on the same BLAS the factors
// are Quark's. Where K or N outgrow one block, three products are grouped otherwise than Quark's calls, equal up to
// rounding, to save flops and K x K or N x K temporaries: GPTAQ's P on the blocks of its triangles, Qronos's re-solve
// rows first when N < K (core/config/asymmetric_gptq_cost.h), GPTAQ's lazy update 512 rows at a time.
// tests/algorithms/asymmetric_gptq_peer_test.cc checks the weights against Quark's own code run on saved statistics.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/gptq.h"
#include "core/config/quant_spec.h"

namespace quark::algorithms {

struct AsymmetricOptions {
  HessianMethod method = HessianMethod::kGptaq;  // kGptaq or kQronos
  /// block_size, act_order, static_groups as GPTQ's; damp_percent is GPTAQ's damping (Qronos damps by alpha).
  GptqOptions gptq;
  double alpha = 0.25;  // GPTAQ: the asymmetric term's weight (Quark 0.25); Qronos: damping share (Quark 1e-3)
  double beta = 1e4;    // Qronos: the Cholesky stabilisation factor (Quark 1e4)
};

/// The paired statistics of one linear's input. Not thread-safe.
class AsymmetricStats {
 public:
  AsymmetricStats(HessianMethod method, int64_t columns);

  /// One batch: `quantized` [B, T, K] or [T, K] as the quantized model feeds the linear, `original` the same shape
  /// as the float model feeds it. INVALID_ARGUMENT when the shapes differ or the last dimension is not K.
  absl::Status Add(const at::Tensor& quantized, const at::Tensor& original);

  int64_t sequences() const { return sequences_; }
  const at::Tensor& hessian() const { return h_; }  // [K, K] float32
  const at::Tensor& cross() const { return cross_; }  // GPTAQ: dXX; Qronos: G. [K, K] float32
  /// Hands both over ({hessian, cross}; this object then holds neither), so that AsymmetricQuantizeWeight works in
  /// their memory instead of copying them (two K x K float32 matrices: 0.97 GB at K = 11008).
  std::pair<at::Tensor, at::Tensor> Release();

 private:
  HessianMethod method_;
  int64_t columns_;
  int64_t sequences_ = 0;
  at::Tensor h_, cross_;
};

/// `weight` [N, K] float32 / bfloat16 / float16; `hessian`, `cross` [K, K] from AsymmetricStats. Handed over
/// (AsymmetricStats::Release, std::move) they are worked on in their own memory; still held elsewhere they are copied
/// first. `spec` as GptqQuantizeWeight's; options.gptq.tensor_ops runs the K x K steps in LibTorch's calls on the host
/// too (the same bits; the path a GPU takes). INVALID_ARGUMENT naming the field for bad options, shapes or a spec the
/// loop cannot run (per-group weights need static_groups: Quark 0.13's own dynamic-group paths of both algorithms
/// fail); FAILED_PRECONDITION for NaN or infinite statistics or when a factorisation fails.
absl::StatusOr<GptqResult> AsymmetricQuantizeWeight(const at::Tensor& weight, at::Tensor hessian, at::Tensor cross,
                                                    const QuantSpec& spec, const AsymmetricOptions& options);

/// What GPTAQ derives from one input's statistics alone: its dead inputs and column order, the inverse Hessian's
/// upper factor and P. Every module reading that input shares it (q/k/v, gate/up), as GPTQ's share GptqFactor: the
/// same bits as deriving it again for each module, without the statistics' copies beside it.
struct GptaqFactor {
  at::Tensor upper;  // U [K, K] float32 row-major, permuted: U^T U = (H + damp I)^-1
  at::Tensor p;      // P = alpha * triu_1(dXX U^T) U [K, K] float32 row-major, permuted
  at::Tensor dead;   // [K] bool: inputs no calibration token reached (H_jj = 0): their weight columns become 0
  at::Tensor perm;   // act order: [K] int64, permuted position -> original column; undefined without
  std::vector<int64_t> host_perm;  // perm on the host (empty without act order)
  double seconds = 0;              // the time it took
};

/// GPTAQ's factor from `hessian` and `cross` (AsymmetricStats, handed over or copied as AsymmetricQuantizeWeight
/// takes them) on `device`. Uses method (kGptaq), damp_percent, act_order, tensor_ops and alpha of `options`; the
/// errors AsymmetricQuantizeWeight gives for them.
absl::StatusOr<GptaqFactor> GptaqFactorOf(at::Tensor hessian, at::Tensor cross, const AsymmetricOptions& options,
                                          at::Device device);

/// GPTAQ's columns of one weight on a factor of its input (GptaqFactorOf with the same options): what
/// AsymmetricQuantizeWeight gives for GPTAQ, bit for bit.
absl::StatusOr<GptqResult> GptaqQuantizeWeight(const at::Tensor& weight, const GptaqFactor& factor,
                                               const QuantSpec& spec, const AsymmetricOptions& options);

/// Qronos's damping base: H's largest eigenvalue by Quark's power iteration (30 steps from ones, on H / max|H|).
double QronosLargestEigenvalue(const at::Tensor& hessian, int iterations = 30);

}  // namespace quark::algorithms
