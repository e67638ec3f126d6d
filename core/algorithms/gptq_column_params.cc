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
    : plan_(plan), options_(options), observer_(spec, plan, dtype), perm_(std::move(perm)) {}

absl::Status ColumnParameters::SetUp(const at::Tensor& w) {
  observer_.SetUp(w, options_);
  if (plan_.grouped && !options_.static_groups) return absl::OkStatus();
  if (plan_.grouped) {
    QUARK_ASSIGN_OR_RETURN(fixed_, observer_.EveryGroup(w));
    return absl::OkStatus();
  }
  QUARK_ASSIGN_OR_RETURN(QuantParams whole, observer_.Of(w));
  fixed_.push_back(std::move(whole));
  return absl::OkStatus();
}

absl::StatusOr<const QuantParams*> ColumnParameters::For(int64_t column, const at::Tensor& work) {
  if (plan_.grouped && !options_.static_groups) {
    if (column % plan_.group_size == 0) {
      const int64_t end = std::min(column + plan_.group_size, work.size(1));
      QUARK_ASSIGN_OR_RETURN(QuantParams p, observer_.Of(work.slice(1, column, end)));
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
  return ConcatParams(options_.static_groups ? fixed_ : observed_, 1);
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
  const QuantParams column_params = ColumnParamsPerRow(params, plan.block_rows);  // a tile's scale for each row
  QUARK_ASSIGN_OR_RETURN(const at::Tensor q,
                         FakeQuantize(x.contiguous(), plan.column_spec, column_params, TensorRole::kWeight));
  return q.to(at::kFloat).squeeze(1);
}

}  // namespace quark::algorithms
