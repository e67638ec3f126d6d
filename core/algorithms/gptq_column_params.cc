#include "core/algorithms/gptq_column_params.h"

#include <algorithm>
#include <utility>

#include "core/base/status_macros.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/nvfp4_quant.h"
#include "kernels/cpu/nvfp4_kernels.h"

namespace quark::algorithms {

ColumnParameters::ColumnParameters(const QuantSpec& spec, const GptqColumnPlan& plan, const GptqOptions& options,
                                   at::ScalarType dtype, std::vector<int64_t> perm)
    : spec_(spec), plan_(plan), options_(options), dtype_(dtype), perm_(std::move(perm)) {}

absl::Status ColumnParameters::SetUp(const at::Tensor& w) {
  if (plan_.nvfp4) {
    nvfp4_global_amax_ = options_.nvfp4_global_amax > 0 ? options_.nvfp4_global_amax : Nvfp4AmaxOf(w.to(dtype_));
  }
  if (plan_.grouped && !options_.static_groups) return absl::OkStatus();
  QUARK_ASSIGN_OR_RETURN(const QuantParams whole, Of(w));
  if (!plan_.grouped) {
    fixed_.push_back(whole);
    return absl::OkStatus();
  }
  const int64_t groups = (w.size(1) + plan_.group_size - 1) / plan_.group_size;
  const auto per_group = [&](const at::Tensor& t) { return t.dim() == 2 && t.size(1) == groups; };
  if (per_group(whole.scale) && per_group(whole.zero_point)) {
    for (int64_t g = 0; g < groups; ++g) {
      fixed_.push_back(QuantParams{whole.scale.slice(1, g, g + 1), whole.zero_point.slice(1, g, g + 1), whole.global_scale});
    }
    return absl::OkStatus();
  }
  for (int64_t start = 0; start < w.size(1); start += plan_.group_size) {
    QUARK_ASSIGN_OR_RETURN(QuantParams p, Of(w.slice(1, start, start + plan_.group_size)));
    fixed_.push_back(std::move(p));
  }
  return absl::OkStatus();
}

absl::StatusOr<const QuantParams*> ColumnParameters::For(int64_t column, const at::Tensor& work) {
  if (plan_.grouped && !options_.static_groups) {
    if (column % plan_.group_size == 0) {
      const int64_t end = std::min(column + plan_.group_size, work.size(1));
      QUARK_ASSIGN_OR_RETURN(QuantParams p, Of(work.slice(1, column, end)));
      observed_.push_back(std::move(p));
    }
    return &observed_.back();
  }
  return &fixed_[static_cast<size_t>(FixedGroupOf(column))];
}

int64_t ColumnParameters::FixedGroupOf(int64_t column) const {
  if (!plan_.grouped) return 0;
  const int64_t original = perm_.empty() ? column : perm_[static_cast<size_t>(column)];
  return original / plan_.group_size;
}

QuantParams ColumnParameters::Whole() const {
  if (!plan_.grouped) return fixed_[0];
  const std::vector<QuantParams>& groups = options_.static_groups ? fixed_ : observed_;
  std::vector<at::Tensor> scales, zero_points;
  for (const QuantParams& p : groups) {
    scales.push_back(p.scale);
    zero_points.push_back(p.zero_point);
  }
  // NVFP4: every group's scales sit under the one global scale.
  return QuantParams{at::cat(scales, 1), at::cat(zero_points, 1),
                     groups.empty() ? at::Tensor() : groups.front().global_scale};
}

absl::StatusOr<QuantParams> ColumnParameters::Of(const at::Tensor& columns) const {
  if (plan_.nvfp4) return Nvfp4ParamsOf(columns.to(dtype_).contiguous(), spec_, nvfp4_global_amax_);
  return ParamsOf(columns.to(dtype_).contiguous(), spec_, TensorRole::kWeight);
}

void LazyUpdate(at::Tensor& work, const at::Tensor& errors, const at::Tensor& u, int64_t i1, int64_t i2) {
  if (i2 >= work.size(1)) return;
  at::Tensor rest = work.slice(1, i2);
  SubtractProduct(rest, errors.slice(1, 0, i2 - i1), u.slice(0, i1, i2).slice(1, i2));
}

absl::StatusOr<at::Tensor> QuantizeColumn(const at::Tensor& column, const GptqColumnPlan& plan,
                                          const QuantParams& params, at::ScalarType dtype) {
  const at::Tensor x = column.unsqueeze(1).to(dtype);
  if (plan.nvfp4) {
    // NVFP4 rounds groups of 16 along K. With the group's scale given, each element is rounded alone, so the column
    // goes through the NVFP4 kernel as the first element of one zero-padded group per row: RTN's element math.
    const at::Tensor group = at::constant_pad_nd(x, {0, kernels::kNvfp4Group - 1});
    return Nvfp4FakeQuantize(group, &params).select(1, 0).to(at::kFloat);
  }
  QuantParams column_params = params;
  if (plan.block_rows > 0) {  // a tile scale per block of rows -> a scale per row
    column_params.scale = params.scale.reshape({-1}).repeat_interleave(plan.block_rows);
    column_params.zero_point = params.zero_point.reshape({-1}).repeat_interleave(plan.block_rows);
  }
  QUARK_ASSIGN_OR_RETURN(const at::Tensor q,
                         FakeQuantize(x.contiguous(), plan.column_spec, column_params, TensorRole::kWeight));
  return q.to(at::kFloat).squeeze(1);
}

}  // namespace quark::algorithms
