// The parameters GPTQ-family column loops in tensor operations (gptq_tensor_ops.cc, gptaq.cc, qronos.cc) round each
// column with, and that rounding: the whole weight's parameters (per tensor / channel), every group's at once from
// the original weight (static groups), or each group's as it starts, observed on the current weight. NVFP4's group
// scales sit under one global scale taken before the loop (GptqOptions::nvfp4_global_amax, or the weight's amax), and
// W4A8's two stages and fp8_block's tiles are rounded column by column with the same element math as RTN's.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/gptq.h"
#include "core/algorithms/gptq_columns.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"

namespace quark::algorithms {

class ColumnParameters {
 public:
  /// `perm`: act order's permuted position -> original column (empty without act order).
  ColumnParameters(const QuantSpec& spec, const GptqColumnPlan& plan, const GptqOptions& options, at::ScalarType dtype,
                   std::vector<int64_t> perm);

  /// Before the loop: from the original weight [N, K] (dead columns zeroed), in its own column order.
  absl::Status SetUp(const at::Tensor& w);

  /// The parameters of (permuted) column `column` of the working weight `work` [N, K].
  absl::StatusOr<const QuantParams*> For(int64_t column, const at::Tensor& work);

  /// The parameters of the whole [N, K] weight (per group: the groups side by side).
  QuantParams Whole() const;

  /// Grouped without static groups: each group's parameters are observed on the working weight as it starts, so
  /// they are known only when the loop reaches it. Otherwise every column's parameters are known before the loop.
  bool ObservesAsItGoes() const { return plan_.grouped && !options_.static_groups; }
  /// Where ObservesAsItGoes() is false: which of Whole()'s groups (permuted) column `column` uses (0 ungrouped).
  int64_t FixedGroupOf(int64_t column) const;

 private:
  GptqColumnPlan plan_;
  GptqOptions options_;
  GptqObserver observer_;
  std::vector<int64_t> perm_;
  std::vector<QuantParams> fixed_;
  std::vector<QuantParams> observed_;
};

/// The lazy update after the block of columns [i1, i2) of a tensor-op column loop: work[:, i2:] -= errors[:, :i2 - i1]
/// @ u[i1:i2, i2:] (SubtractProduct).
void LazyUpdate(at::Tensor& work, const at::Tensor& errors, const at::Tensor& u, int64_t i1, int64_t i2);

/// The engine's fake quantization of one column [N] float32 in the weight's dtype with its parameters (`params` as
/// ColumnParameters::For gives them), back as [N] float32.
absl::StatusOr<at::Tensor> QuantizeColumn(const at::Tensor& column, const GptqColumnPlan& plan,
                                          const QuantParams& params, at::ScalarType dtype);

}  // namespace quark::algorithms
