#include "core/algorithms/gptq_column_params.h"

#include <algorithm>
#include <utility>

#include "core/base/status_macros.h"
#include "core/numerics/fake_quant.h"

namespace quark::algorithms {

ColumnParameters::ColumnParameters(const QuantSpec& spec, const GptqColumnPlan& plan, const GptqOptions& options,
                                   at::ScalarType dtype, std::vector<int64_t> perm)
    : spec_(spec), plan_(plan), options_(options), dtype_(dtype), perm_(std::move(perm)) {}

absl::Status ColumnParameters::SetUp(const at::Tensor& w) {
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
      fixed_.push_back(QuantParams{whole.scale.slice(1, g, g + 1), whole.zero_point.slice(1, g, g + 1)});
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
  return QuantParams{at::cat(scales, 1), at::cat(zero_points, 1)};
}

absl::StatusOr<QuantParams> ColumnParameters::Of(const at::Tensor& columns) const {
  return ParamsOf(columns.to(dtype_).contiguous(), spec_, TensorRole::kWeight);
}

// The engine's fake quantization of one column [N] float32 in the weight's dtype, back as [N] float32.
absl::StatusOr<at::Tensor> QuantizeColumn(const at::Tensor& column, const QuantSpec& column_spec,
                                          const QuantParams& params, at::ScalarType dtype) {
  QUARK_ASSIGN_OR_RETURN(const at::Tensor q, FakeQuantize(column.unsqueeze(1).to(dtype).contiguous(), column_spec,
                                                          params, TensorRole::kWeight));
  return q.to(at::kFloat).squeeze(1);
}

}  // namespace quark::algorithms
