#include "core/numerics/imatrix_mse_observer.h"

#include <cmath>
#include <limits>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/quant_types.h"
#include "core/numerics/fake_quant.h"

namespace quark {
namespace {

absl::Status CheckArguments(const at::Tensor& weight, const at::Tensor& importance, const QuantSpec& spec,
                            const ImatrixMseOptions& o) {
  if (o.grid <= 0) return absl::InvalidArgumentError(StrCat("grid: must be > 0, got ", o.grid));
  if (!(o.maxshrink >= 0 && o.maxshrink <= 1)) {
    return absl::InvalidArgumentError(StrCat("maxshrink: must be in [0, 1], got ", o.maxshrink));
  }
  if (o.patience < 0) return absl::InvalidArgumentError(StrCat("patience: must be >= 0, got ", o.patience));
  if (!(std::isfinite(o.norm) && o.norm > 0)) {
    return absl::InvalidArgumentError(StrCat("norm: must be a finite positive number, got ", o.norm));
  }
  if (!weight.defined() || weight.dim() != 2) return absl::InvalidArgumentError("weight: expected [N, K]");
  if (!IsIntegerType(spec.dtype) || spec.is_dynamic) {
    return absl::InvalidArgumentError("dtype: imatrix_mse searches static integer weight ranges");
  }
  // The axes as the engine's layout resolves them on a 2-D weight (quant_layout.cc: channels default to 0, groups
  // to the last axis).
  const int channel_axis = spec.ch_axis.value_or(0), group_axis = spec.ch_axis.value_or(-1);
  const bool channel = spec.qscheme == QScheme::kPerChannel && (channel_axis == 0 || channel_axis == -2);
  const int64_t group_size = spec.group_size.value_or(0);
  const bool group = spec.qscheme == QScheme::kPerGroup && group_size > 0 && (group_axis == 1 || group_axis == -1);
  if (!channel && !group) {
    return absl::InvalidArgumentError("qscheme: imatrix_mse needs per_channel (ch_axis 0) or per_group (ch_axis 1)");
  }
  if (group && weight.size(1) % group_size != 0) {
    return absl::InvalidArgumentError(StrCat("group_size: ", group_size, " does not divide ", weight.size(1)));
  }
  if (importance.defined()) {
    if (importance.dim() != 1 || importance.size(0) != weight.size(1)) {
      return absl::InvalidArgumentError(StrCat("importance: expected [", weight.size(1), "]"));
    }
    const at::Tensor imp = importance.to(at::kFloat);
    if (!at::isfinite(imp).all().item<bool>() || (imp < 0).any().item<bool>()) {
      return absl::InvalidArgumentError("importance: must be finite and >= 0");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QuantParams> ImatrixMseParams(const at::Tensor& weight, const at::Tensor& importance,
                                             const QuantSpec& spec, const ImatrixMseOptions& options) {
  QUARK_RETURN_IF_ERROR(CheckArguments(weight, importance, spec, options));
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t group = spec.qscheme == QScheme::kPerGroup ? spec.group_size.value_or(k) : k;
  const at::Tensor grouped = weight.reshape({n, k / group, group});
  const at::Tensor min = std::get<0>(grouped.min(-1)), max = std::get<0>(grouped.max(-1));  // [N, G]
  // The shape the engine's own observer gives these parameters ([N] per channel, [N, G] per group).
  QuantSpec minmax = spec;  // the shape only: the spec's own observer would be this search again
  minmax.observer = ObserverKind::kMinMax;
  QUARK_ASSIGN_OR_RETURN(const QuantParams base, ParamsOf(weight, minmax, TensorRole::kWeight));
  at::Tensor weights;  // [1, G, group]: importance normalised to mean 1 (llm-compressor's _prepare_importance)
  if (importance.defined()) {
    const at::Tensor imp = importance.to(at::kFloat);
    const at::Tensor all_zero = (imp == 0).all();
    if (!all_zero.item<bool>()) {
      weights = imp.div(imp.mean().add(std::numeric_limits<float>::min())).reshape({1, k / group, group});
    }
  }
  const at::Tensor observed = grouped.to(at::kFloat);
  at::Tensor best_error = at::full({n, k / group}, std::numeric_limits<float>::max(), observed.options());
  at::Tensor best_min = min.clone(), best_max = max.clone();
  const int steps = std::max(1, static_cast<int>(options.maxshrink * options.grid));
  int no_improve = 0;
  for (int i = 0; i <= steps; ++i) {
    const double p = 1.0 - static_cast<double>(i) / options.grid;
    const at::Tensor shrink_min = min.mul(p), shrink_max = max.mul(p);
    QUARK_ASSIGN_OR_RETURN(const QuantParams params, ComputeQuantParams(shrink_min, shrink_max, spec));
    QUARK_ASSIGN_OR_RETURN(const at::Tensor q, FakeQuantize(weight, spec, params, TensorRole::kWeight));
    at::Tensor e = q.to(at::kFloat).reshape({n, k / group, group}).sub_(observed).abs_().pow_(options.norm);
    if (weights.defined()) e.mul_(weights);
    const at::Tensor err = e.sum(-1);
    const at::Tensor improved = err < best_error;
    if (improved.any().item<bool>()) {
      best_error = at::where(improved, err, best_error);
      best_min = at::where(improved, shrink_min, best_min);
      best_max = at::where(improved, shrink_max, best_max);
      no_improve = 0;
    } else if (options.patience > 0 && ++no_improve >= options.patience) {
      break;
    }
  }
  QUARK_ASSIGN_OR_RETURN(QuantParams best, ComputeQuantParams(best_min, best_max, spec));
  best.scale = best.scale.reshape(base.scale.sizes());
  best.zero_point = best.zero_point.reshape(base.zero_point.sizes());
  return best;
}

absl::Status ImatrixMseObserver::Observe(const at::Tensor& x) {
  if (weight_.defined()) return absl::InvalidArgumentError("observer: imatrix_mse observes one weight, once");
  weight_ = x;
  ++batches_;
  return absl::OkStatus();
}

absl::StatusOr<QuantParams> ImatrixMseObserver::ComputeParams() const {
  if (!weight_.defined()) return absl::FailedPreconditionError("observer: imatrix_mse has seen no weight");
  if (!importance_.defined()) {
    return absl::FailedPreconditionError(
        "observer: imatrix_mse needs its layer's importance matrix from calibration (quark quantize or a job with "
        "calibration data); this weight has none");
  }
  return ImatrixMseParams(weight_, importance_, spec_);
}

absl::StatusOr<std::pair<at::Tensor, at::Tensor>> ImatrixMseObserver::Range() const {
  QUARK_ASSIGN_OR_RETURN(const QuantParams p, ComputeParams());
  const auto [qmin, qmax] = IntegerRange(spec_.dtype);  // ImatrixMseParams accepts integer dtypes only
  const at::Tensor scale = p.scale.to(at::kFloat), zero = p.zero_point.to(at::kFloat);
  return std::make_pair(scale.mul(zero.neg().add(qmin)), scale.mul(zero.neg().add(qmax)));
}

}  // namespace quark
