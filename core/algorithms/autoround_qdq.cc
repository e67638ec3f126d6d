#include "core/algorithms/autoround_qdq.h"

#include <ATen/core/grad_mode.h>  // at::NoGradGuard (LibTorch 2.11 no longer brings it with ATen.h)

#include <limits>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/numerics/fake_quant.h"

namespace quark::algorithms {
namespace {

constexpr double kEps = std::numeric_limits<float>::epsilon();  // the engine's smallest scale (quant_params.cc)

// Forward: round half to even; backward: the identity (auto-round's round_ste).
at::Tensor RoundSte(const at::Tensor& x) { return x + (at::round(x) - x).detach(); }

// clamp(x, lo, hi) as clamp_max then clamp_min: the same values and the same gradient (grad where lo <= x <= hi,
// else 0), but backwards of one comparison each, where clamp's joins two with logical_and, which LibTorch 1.13's lazy
// tensors cannot shape (no Meta kernel): the lazy test device could not train through it.
at::Tensor ClampBetween(const at::Tensor& x, double lo, double hi) { return at::clamp_min(at::clamp_max(x, hi), lo); }

// [N, K] -> [N, K / g, g] in float32.
at::Tensor Grouped(const at::Tensor& weight, int64_t g) {
  return weight.to(at::kFloat).reshape({weight.size(0), weight.size(1) / g, g});
}

struct Ranges {
  at::Tensor lo;  // [N, G]
  at::Tensor hi;
};

Ranges ClippedRanges(const at::Tensor& grouped, const AutoRoundTensors& t) {
  const at::Tensor lo = at::clamp_max(std::get<0>(grouped.min(-1)), 0.0) * t.min_scale;
  const at::Tensor hi = at::clamp_min(std::get<0>(grouped.max(-1)), 0.0) * t.max_scale;
  return {lo, hi};
}

}  // namespace

absl::StatusOr<int64_t> AutoRoundGroupSize(const QuantSpec& spec, int64_t in_features) {
  if (spec.qscheme == QScheme::kPerChannel) return in_features;
  if (spec.qscheme != QScheme::kPerGroup || !spec.group_size) {
    return absl::InvalidArgumentError(StrCat("qscheme: autoround runs per_group or per_channel weights, got ",
                                             Name(spec.qscheme)));
  }
  const int64_t g = *spec.group_size == -1 ? in_features : *spec.group_size;
  if (g <= 0 || in_features % g != 0) {
    return absl::InvalidArgumentError(
        StrCat("group_size: ", *spec.group_size, " does not divide the ", in_features, " inputs"));
  }
  return g;
}

absl::StatusOr<AutoRoundTensors> InitAutoRoundTensors(const at::Tensor& weight, const QuantSpec& spec) {
  if (weight.dim() != 2) return absl::InvalidArgumentError("weight: expected [out, in]");
  QUARK_ASSIGN_OR_RETURN(const int64_t g, AutoRoundGroupSize(spec, weight.size(1)));
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(weight.device());
  const int64_t n = weight.size(0);
  const int64_t groups = weight.size(1) / g;
  AutoRoundTensors t;
  t.value = at::zeros({n, groups, g}, f32).set_requires_grad(true);
  t.min_scale = at::ones({n, groups}, f32).set_requires_grad(true);
  t.max_scale = at::ones({n, groups}, f32).set_requires_grad(true);
  return t;
}

at::Tensor AutoRoundQdq(const at::Tensor& weight, const AutoRoundTensors& t, const QuantSpec& spec) {
  const auto [qmin_i, qmax_i] = IntegerRange(spec.ElementType());
  const double qmin = qmin_i;
  const double qmax = qmax_i;
  const at::Tensor w = Grouped(weight, t.value.size(2));
  const Ranges r = ClippedRanges(w, t);
  at::Tensor scale;
  at::Tensor zp;
  if (spec.symmetric) {
    scale = at::clamp_min(at::maximum(-r.lo, r.hi) / ((qmax - qmin) / 2.0), kEps).unsqueeze(-1);
    zp = at::zeros_like(scale);
  } else {
    scale = at::clamp_min((r.hi - r.lo) / (qmax - qmin), kEps).unsqueeze(-1);
    zp = ClampBetween(qmin - RoundSte(r.lo.unsqueeze(-1) / scale), qmin, qmax);
  }
  // x * (1 / s), as the engine's quantizer computes it (lane_table.h), so that V = 0 is its round to nearest.
  const at::Tensor q = ClampBetween(RoundSte(w * at::reciprocal(scale) + t.value) + zp, qmin, qmax);
  return (scale * (q - zp)).reshape(weight.sizes());
}

absl::StatusOr<AutoRoundWeight> FinishAutoRound(const at::Tensor& weight, const AutoRoundTensors& t,
                                                const QuantSpec& spec) {
  at::NoGradGuard no_grad;
  const int64_t n = weight.size(0);
  const at::Tensor w = Grouped(weight, t.value.size(2));
  Ranges r = ClippedRanges(w, t);
  if (spec.qscheme == QScheme::kPerChannel) {
    r.lo = r.lo.reshape({n});
    r.hi = r.hi.reshape({n});
  }
  AutoRoundWeight out;
  // The engine's parameters (computed on the host), then on the weight's device with it.
  QUARK_ASSIGN_OR_RETURN(out.params, ComputeQuantParams(r.lo.to(weight.scalar_type()).cpu(),
                                                        r.hi.to(weight.scalar_type()).cpu(), spec));
  out.params.scale = out.params.scale.to(weight.device());
  out.params.zero_point = out.params.zero_point.to(weight.device());
  const auto [qmin, qmax] = IntegerRange(spec.ElementType());
  const at::Tensor scale = out.params.scale.to(at::kFloat).reshape({n, -1, 1});
  const at::Tensor zp = out.params.zero_point.to(at::kFloat).reshape({n, -1, 1});
  const at::Tensor q = at::clamp(at::round(w * at::reciprocal(scale) + t.value) + zp, qmin, qmax);
  const at::Tensor on_grid = (scale * (q - zp)).reshape(weight.sizes()).to(weight.scalar_type());
  // The cast to a bfloat16 / float16 weight may leave a value beside its grid point: the engine's quantizer puts it
  // back, so the weight is exactly what the export's codes give.
  QUARK_ASSIGN_OR_RETURN(out.weight, FakeQuantize(on_grid, spec, out.params));
  return out;
}

}  // namespace quark::algorithms
