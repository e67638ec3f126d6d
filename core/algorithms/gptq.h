// GPTQ (Frantar et al., 2022) on one weight matrix, as AMD Quark computes it (quark/torch/algorithm/gptq/gptq.py and
// algorithm/common.py): columns are quantized one at a time with the engine's own quantizer for the weight spec,
// and each column's rounding error is spread over the columns not yet quantized through the upper Cholesky factor of
// the inverse Hessian, with lazy updates of `block_size` columns.
//
//   dead inputs (H_jj = 0): H_jj = 1, W[:, j] = 0
//   parameters: per tensor / channel from W; per group (and MX blocks) from the original W with static groups, else
//               from the current, already-updated columns when a group starts (Quark; IST-DASLab uses a stale copy)
//   act order: columns by diag(H) descending, put back at the end
//   Hinv = upper Cholesky factor of (H + damp_percent * mean(diag H) * I)^-1, with more damping when not PD
//
// Every float operation of the column loop is Quark's, element for element (gptq.cc), so with the Hessian and the
// factor computed as Quark computes them (the default; see HessianAccumulator) the result is Quark's bit for bit on
// the same BLAS. The factorisations run on the BLAS threads; the column loop runs on ranges of rows in parallel
// (rows never mix), its lazy-update GEMMs single-threaded on fixed blocks of rows, so the column loop's bits do not
// depend on the thread count on any BLAS kernels (on OpenBLAS's AVX-512 ones they are also the one-GEMM bits).
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"

namespace quark::algorithms {

struct GptqOptions {
  double damp_percent = 0.01;  // in (0, 1]: damping = damp_percent * mean(diag H)
  int64_t block_size = 128;    // columns per lazy update
  bool act_order = false;      // Quark's desc_act
  bool static_groups = false;  // group parameters from the original weight (required with act_order)
  /// false: the inverse Hessian factor by Quark's own calls (cholesky, cholesky_inverse, upper cholesky), bit for
  /// bit Quark's; true: one factorisation and a triangular inverse (linalg.h), half the flops, equal up to rounding
  /// (which GPTQ amplifies on singular Hessians: see HessianAccumulator).
  bool fast_linalg = false;
  /// Runs the tensor-operation path (gptq_tensor_ops.h) on the CPU too: the parity tests and benchmarks. A weight or
  /// Hessian on another device (a GPU) always takes that path.
  bool tensor_ops = false;
  /// The tensor-operation path runs each block's sequential part as one kernel launch where the device has that
  /// kernel and the spec is an integer one (gptq_fused_blocks.h): the same bits as column by column, without ~10
  /// device operations a column. false: column by column (the parity tests and benchmarks).
  bool fused_blocks = true;
  /// NVFP4 weights: the amax their float32 global scale comes from, taken on the float weights before any column is
  /// rounded. Fused shards (q/k/v, gate/up, an expert's gate/up) pass the largest of theirs, so that they share one
  /// global scale as vLLM needs; 0: the weight's own amax.
  float nvfp4_global_amax = 0;
};

struct GptqResult {
  /// [N, K] in the weight's dtype: every value on the quantization grid of `params` (FakeQuantize of it with
  /// `params` gives it back), columns in their original order.
  at::Tensor weight;
  /// The spec's parameters for the whole [N, K] weight (per group: [N, K / group]; MX: [N, ceil(K / 32)]).
  QuantParams params;
  /// Diagonal added beyond the standard damping when H + damp I was not positive definite (0 = none).
  double extra_damp = 0;
  /// Where the time went: the inverse Hessian factor, and the column loop with its lazy updates.
  double factor_seconds = 0;
  double columns_seconds = 0;
  /// The column loop ran in fused blocks (GptqOptions::fused_blocks, where it applies).
  bool fused_blocks = false;
};

/// What GPTQ derives from a Hessian alone: the dead inputs, the column order and the inverse Hessian factor. Every
/// module that reads the same input shares it (q/k/v, gate/up), so a layer computes it once per distinct input:
/// exact, the same bits as computing it again for each module.
struct GptqFactor {
  at::Tensor upper;  // U [K, K] float32 (any strides, zero below the diagonal): U^T U = (H + damp I)^-1, permuted
  at::Tensor dead;   // [K] bool: inputs no calibration token reached (H_jj = 0): their weight columns become 0
  at::Tensor perm;   // act order: [K] int64, permuted position -> original column; undefined without act order
  /// Diagonal added beyond the standard damping when H + damp I was not positive definite (0 = none).
  double extra_damp = 0;
  double seconds = 0;  // the time it took
};

/// `hessian` [K, K] float32, symmetric (2/n sum x x^T; its scale does not matter). Uses damp_percent, act_order
/// and fast_linalg of `options`. INVALID_ARGUMENT naming the field for bad options or shapes; FAILED_PRECONDITION
/// when H has NaN or infinite entries or stays not positive definite after Quark's five retries. A `hessian` passed
/// with no other reference to it (std::move of the last one) is used in place, not copied.
absl::StatusOr<GptqFactor> GptqFactorOf(at::Tensor hessian, const GptqOptions& options);

/// `weight` [N, K] float32 / bfloat16 / float16 (parameters are computed and values rounded in its dtype, the
/// arithmetic of the updates is float32); `factor` from GptqFactorOf with the same options. `spec` is the weight
/// spec the numerics run: per_tensor, per_channel on axis 0, per_group or MX along axis 1, static.
/// INVALID_ARGUMENT naming the field for a spec GPTQ cannot run or shapes that disagree.
absl::StatusOr<GptqResult> GptqQuantizeWeight(const at::Tensor& weight, const GptqFactor& factor,
                                              const QuantSpec& spec, const GptqOptions& options);

/// Both steps for one weight.
absl::StatusOr<GptqResult> GptqQuantizeWeight(const at::Tensor& weight, at::Tensor hessian, const QuantSpec& spec,
                                              const GptqOptions& options);

}  // namespace quark::algorithms
