// How GPTQ quantizes one column of a weight under a spec: what both implementations of the column loop (gptq.cc on
// the CPU's own kernels, gptq_tensor_ops.cc in tensor operations on any device) resolve from the spec and the
// weight's shape before any work, so that they accept the same specs with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"

namespace quark::algorithms {

struct GptqOptions;

/// The longest block whose lazy update one GEMM into the weight (C - A B: beta 1, alpha -1) rounds as Quark's
/// matmul-then-subtract: OpenBLAS sums a shared dimension up to its kernel depth (>= 256 for single precision) in one
/// pass, then adds the sum to C, so C + (-(A B)) is C - (A B) bit for bit. Longer blocks take Quark's two steps.
inline constexpr int64_t kOneGemmUpdateMaxBlock = 256;

/// c -= a @ b, as GPTQ's lazy updates take it: one GEMM into c (addmm_, beta 1, alpha -1) while a's inner dimension
/// (the block's columns) is at most kOneGemmUpdateMaxBlock, or always with `one_gemm` (fast linalg, which gives up
/// Quark's bits); else Quark's matmul-then-subtract. One GEMM makes no temporary of c's size and no second pass.
void SubtractProduct(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, bool one_gemm = false);

struct GptqColumnPlan {
  /// The spec applied to one [N, 1] column with that column's parameters (per group: groups of one element; MX keeps
  /// its block spec, a one-element tail block; per_block: per output channel, each row with its tile's scale; W4A8:
  /// the spec itself, both stages per output channel).
  QuantSpec column_spec;
  /// per_group, MX, NVFP4 or per_block: parameters per group of input columns.
  bool grouped = false;
  int64_t group_size = 0;  // grouped only
  /// per_block (2-D tiles, fp8_block): weight rows per row of parameters; 0 otherwise.
  int64_t block_rows = 0;
  /// NVFP4: e4m3 group scales under the float32 global scale, which no one-element spec carries.
  bool nvfp4 = false;
};

/// INVALID_ARGUMENT naming the field for a spec GPTQ cannot run on a weight of `sizes` ([N, K]): dynamic, a cast,
/// per_token, channels or groups on the wrong axis, act order with groups observed as they start. Tiles and NVFP4
/// groups must divide the weight as ResolveLayout requires.
absl::StatusOr<GptqColumnPlan> PlanGptqColumns(const QuantSpec& spec, at::IntArrayRef sizes, const GptqOptions& options);

/// One column's parameters for its rows: `params` itself, or with 2-D tiles (`block_rows` > 0) each tile's scale and
/// zero point repeated for its weight rows (the column spec is then per output channel).
QuantParams ColumnParamsPerRow(const QuantParams& params, int64_t block_rows);

/// Parameters side by side along `dim` (a weight's groups along 1, its row ranges along 0), under the first part's
/// global scale (NVFP4's one for every group).
QuantParams ConcatParams(const std::vector<QuantParams>& parts, int64_t dim);

/// How both column loops observe parameters on a weight's columns: in the weight's dtype, as RTN observes them, with
/// NVFP4's group scales under the one global scale taken before the loop.
class GptqObserver {
 public:
  GptqObserver(const QuantSpec& spec, const GptqColumnPlan& plan, at::ScalarType dtype)
      : spec_(spec), plan_(plan), dtype_(dtype) {}

  /// Before the loop, on the whole original weight [N, K] (dead columns zeroed): NVFP4's global amax,
  /// GptqOptions::nvfp4_global_amax when fused shards share one, else the weight's own.
  void SetUp(const at::Tensor& w, const GptqOptions& options);

  /// The parameters of `columns` ([N, c] of the weight, float32 or the weight's dtype).
  absl::StatusOr<QuantParams> Of(const at::Tensor& columns) const;

  /// Static groups: every group's parameters from the original weight, in column order (one observation of the
  /// whole weight, sliced, where its parameters come per group: the same values as group by group).
  absl::StatusOr<std::vector<QuantParams>> EveryGroup(const at::Tensor& w) const;

 private:
  QuantSpec spec_;
  GptqColumnPlan plan_;
  at::ScalarType dtype_;
  float nvfp4_global_amax_ = 0;
};

}  // namespace quark::algorithms
