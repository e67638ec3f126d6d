#include "core/algorithms/gptq_columns.h"

#include "core/algorithms/gptq.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/quant_types.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/nvfp4_quant.h"
#include "core/numerics/quant_layout.h"

namespace quark::algorithms {

absl::StatusOr<GptqColumnPlan> PlanGptqColumns(const QuantSpec& spec, at::IntArrayRef sizes,
                                               const GptqOptions& options) {
  if (spec.is_dynamic) return absl::InvalidArgumentError("weight.is_dynamic: GPTQ needs a static weight spec");
  if (IsCastType(spec.dtype)) {
    return absl::InvalidArgumentError(StrCat("weight.dtype: ", Name(spec.dtype), " is a cast, nothing to round"));
  }
  QUARK_ASSIGN_OR_RETURN(const QuantLayout layout, ResolveLayout(spec, TensorRole::kWeight, sizes));
  GptqColumnPlan plan{spec, false, 0};
  switch (layout.granularity) {
    case Granularity::kPerTensor: break;
    case Granularity::kPerChannel:
      if (layout.axis != 0) {
        return absl::InvalidArgumentError(
            StrCat("weight.ch_axis: GPTQ quantizes per output channel (axis 0), got axis ", layout.axis));
      }
      break;
    case Granularity::kPerGroup:
    case Granularity::kMxBlock:
      if (layout.axis != 1) {
        return absl::InvalidArgumentError(
            StrCat("weight.ch_axis: GPTQ groups run along the input axis (1), got axis ", layout.axis));
      }
      plan.grouped = true;
      plan.group_size = layout.group_size > 0 ? layout.group_size : sizes[1];
      plan.nvfp4 = spec.IsNvfp4();
      if (layout.granularity == Granularity::kPerGroup && !plan.nvfp4) plan.column_spec.group_size = 1;
      break;
    case Granularity::kPerBlock:
      // A column crosses one tile per block of rows: it is rounded per output channel with each row's tile scale.
      plan.grouped = true;
      plan.group_size = layout.group_size;
      plan.block_rows = layout.block_rows;
      plan.column_spec.qscheme = QScheme::kPerChannel;
      plan.column_spec.ch_axis = 0;
      plan.column_spec.block_size.clear();
      // E8M0 tiles: the tile scales are float32 powers of two in the parameters, which an fp8 per-channel spec
      // rounds with the same float kernel the tiles run.
      plan.column_spec.scale_format = ScaleFormat::kFloat;
      break;
    case Granularity::kPerToken:
      return absl::InvalidArgumentError("weight.qscheme: per_token is for dynamic activations, not GPTQ weights");
  }
  if (options.act_order && plan.grouped && !options.static_groups) {
    return absl::InvalidArgumentError("desc_act: act order with groups needs static_groups");
  }
  return plan;
}

QuantParams ColumnParamsPerRow(const QuantParams& params, int64_t block_rows) {
  if (block_rows <= 0) return params;
  QuantParams per_row = params;
  per_row.scale = params.scale.reshape({-1}).repeat_interleave(block_rows);
  per_row.zero_point = params.zero_point.reshape({-1}).repeat_interleave(block_rows);
  return per_row;
}

QuantParams ConcatParams(const std::vector<QuantParams>& parts, int64_t dim) {
  std::vector<at::Tensor> scales, zero_points;
  for (const QuantParams& p : parts) {
    scales.push_back(p.scale);
    zero_points.push_back(p.zero_point);
  }
  return QuantParams{at::cat(scales, dim), at::cat(zero_points, dim),
                     parts.empty() ? at::Tensor() : parts.front().global_scale};
}

void GptqObserver::SetUp(const at::Tensor& w, const GptqOptions& options) {
  if (!plan_.nvfp4) return;
  nvfp4_global_amax_ = options.nvfp4_global_amax > 0 ? options.nvfp4_global_amax : Nvfp4AmaxOf(w.to(dtype_));
}

absl::StatusOr<QuantParams> GptqObserver::Of(const at::Tensor& columns) const {
  if (plan_.nvfp4) return Nvfp4ParamsOf(columns.to(dtype_).contiguous(), spec_, nvfp4_global_amax_);
  return ParamsOf(columns.to(dtype_).contiguous(), spec_, TensorRole::kWeight);
}

absl::StatusOr<std::vector<QuantParams>> GptqObserver::EveryGroup(const at::Tensor& w) const {
  std::vector<QuantParams> groups;
  const int64_t count = (w.size(1) + plan_.group_size - 1) / plan_.group_size;
  QUARK_ASSIGN_OR_RETURN(const QuantParams whole, Of(w));
  const auto per_group = [&](const at::Tensor& t) { return t.dim() == 2 && t.size(1) == count; };
  if (per_group(whole.scale) && per_group(whole.zero_point)) {
    for (int64_t g = 0; g < count; ++g) {
      groups.push_back(
          QuantParams{whole.scale.slice(1, g, g + 1), whole.zero_point.slice(1, g, g + 1), whole.global_scale});
    }
    return groups;
  }
  for (int64_t start = 0; start < w.size(1); start += plan_.group_size) {  // parameters shaped otherwise
    QUARK_ASSIGN_OR_RETURN(QuantParams p, Of(w.slice(1, start, start + plan_.group_size)));
    groups.push_back(std::move(p));
  }
  return groups;
}

void SubtractProduct(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, bool one_gemm) {
  if (one_gemm || a.size(1) <= kOneGemmUpdateMaxBlock) {
    c.addmm_(a, b, /*beta=*/1, /*alpha=*/-1);
  } else {
    c.sub_(a.matmul(b));
  }
}

}  // namespace quark::algorithms
