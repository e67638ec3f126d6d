#include "core/algorithms/gptq_columns.h"

#include "core/algorithms/gptq.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/quant_types.h"
#include "core/numerics/quant_layout.h"

namespace quark::algorithms {

absl::StatusOr<GptqColumnPlan> PlanGptqColumns(const QuantSpec& spec, at::IntArrayRef sizes,
                                               const GptqOptions& options) {
  if (spec.is_dynamic) return absl::InvalidArgumentError("weight.is_dynamic: GPTQ needs a static weight spec");
  if (IsCastType(spec.dtype)) {
    return absl::InvalidArgumentError(StrCat("weight.dtype: ", Name(spec.dtype), " is a cast, nothing to round"));
  }
  if (spec.IsProgressive()) {  // #30 W4A8: the int4 grid sits on fp8 values; GPTQ's column loop rounds floats
    return absl::UnimplementedError("weight.fp8_first_stage: GPTQ does not run W4A8's two-stage (fp8 then int4) "
                                    "weights; use RTN, AWQ or rotation");
  }
  if (spec.IsNvfp4()) {  // #30: its block scales sit under a global scale shared by the fused shards (RTN computes it)
    return absl::UnimplementedError("weight.scale_format: GPTQ does not run NVFP4 weights (e4m3 group scales under a "
                                    "per-tensor global scale); use RTN, AWQ or rotation");
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
      if (layout.granularity == Granularity::kPerGroup) plan.column_spec.group_size = 1;
      break;
    case Granularity::kPerBlock:
      return absl::UnimplementedError("weight.qscheme: GPTQ does not run per_block weights (2-D tiles); use RTN");
    case Granularity::kPerToken:
      return absl::InvalidArgumentError("weight.qscheme: per_token is for dynamic activations, not GPTQ weights");
  }
  if (options.act_order && plan.grouped && !options.static_groups) {
    return absl::InvalidArgumentError("desc_act: act order with groups needs static_groups");
  }
  return plan;
}

}  // namespace quark::algorithms
