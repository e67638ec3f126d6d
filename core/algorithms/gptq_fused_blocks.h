// GPTQ's column loop in tensor operations with each block's sequential part fused into one kernel launch
// (kernels/element/gptq_row.h through the numerics' device seam, QuantKernels::GptqBlock): per block one
// launch (one per group inside the block where group parameters are observed as groups start) and the lazy update's
// GEMM, instead of about ten device operations a column. Same float operations, same order, same bits as the
// column-by-column loop of gptq_tensor_ops.cc on the same device.
#pragma once

#include <cstdint>
#include <functional>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/gptq_column_params.h"
#include "core/algorithms/gptq_columns.h"
#include "core/config/quant_spec.h"

namespace quark::algorithms {

/// What GPTAQ and Qronos (asymmetric_gptq.cc) change in the fused loop; the default is GPTQ's.
struct FusedBlockVariant {
  /// GPTAQ: P [K, K] float32, contiguous, on work's device: each in-block update subtracts x * P[j][t] from
  /// e * U[j][t] (GptqBlockArgs::asym).
  at::Tensor gptaq_p;
  /// Work's column 0 is the weight's column `column_offset` where the parameters' groups are looked up (Qronos runs
  /// the loop on columns 1.. after rounding its first column its own way). Static parameters only.
  int64_t column_offset = 0;
  /// After block [i1, i2) of work: the update of the later columns from the block's errors ([N, >= i2 - i1]);
  /// unset: GPTQ's LazyUpdate.
  std::function<void(int64_t i1, int64_t i2, const at::Tensor& errors)> after_block;
};

/// The column loop of gptq_tensor_ops.cc over work [N, K] (float32, contiguous, columns in act order; updated in
/// place) into q [N, K] (float32, contiguous), with u [K, K] the upper inverse factor on work's device. Integer grids
/// (per tensor, channel, group, 2-D tile), float ones (fp8 / fp6 / fp4 with their scales, OCP MX's float
/// elements, NVFP4), MXINT8 and W4A8's two stages. Returns false, having changed nothing, where it does not apply (a
/// cast, the legacy MX spelling, or a device without the block kernel); the caller then runs the column loop.
absl::StatusOr<bool> QuantizeColumnsInFusedBlocks(at::Tensor& work, at::Tensor& q, const at::Tensor& u,
                                                  const QuantSpec& spec, const GptqColumnPlan& plan,
                                                  ColumnParameters& parameters, at::ScalarType dtype,
                                                  int64_t block_size, const FusedBlockVariant& variant = {});

}  // namespace quark::algorithms
