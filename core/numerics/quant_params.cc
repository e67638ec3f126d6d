#include "core/numerics/quant_params.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/numerics/format_map.h"
#include "core/numerics/quant_layout.h"
#include "kernels/cpu/nvfp4_kernels.h"
#include "kernels/cpu/scalar_convert.h"

namespace quark {
namespace {

constexpr float kEps = std::numeric_limits<float>::epsilon();  // 1.1920929e-07

using Rounder = float (*)(float);
float Identity(float v) { return v; }

Rounder RounderFor(at::ScalarType t) {
  if (t == at::kBFloat16) return &kernels::RoundTrip<c10::BFloat16>;
  if (t == at::kHalf) return &kernels::RoundTrip<c10::Half>;
  return &Identity;
}

struct ScalarParams {
  float scale;
  float zero_point;
};

float RoundHalfEven(float v) { return std::nearbyint(v); }

ScalarParams IntegerParams(float lo, float hi, const QuantSpec& spec, Rounder r) {
  const auto [qmin, qmax] = IntegerRange(spec.ElementType());
  const float span = static_cast<float>(qmax - qmin);
  if (spec.zero_point_type == ZeroPointType::kFloat32 && !spec.symmetric) {
    float s = r(r(hi - lo) / span);
    if (s <= kEps) s = 1.0f;
    return {s, r(-lo / s)};
  }
  const float mn = std::min(lo, 0.0f);
  const float mx = std::max(hi, 0.0f);
  if (spec.symmetric) {
    // (qmax - qmin) / 2: int8 divides by 127.5, int4 by 7.5.
    return {std::max(r(std::max(-mn, mx) / r(span / 2.0f)), r(kEps)), 0.0f};
  }
  const float s = std::max(r(r(mx - mn) / span), r(kEps));
  return {s, std::clamp(static_cast<float>(qmin) - RoundHalfEven(r(mn / s)), float(qmin), float(qmax))};
}

// p = round(-log2(clamp(s, 2^-127, 2^127))), s = 2^-p; an asymmetric zero point follows the new scale.
ScalarParams ToPowerOfTwo(ScalarParams p, float lo, const QuantSpec& spec) {
  const float c = std::clamp(p.scale, kernels::Pow2(-127), kernels::Pow2(127));
  const int e = static_cast<int>(RoundHalfEven(-std::log2(c)));
  p.scale = kernels::Pow2(-e);
  if (!spec.symmetric) {
    const auto [qmin, qmax] = IntegerRange(spec.ElementType());
    const float mn = std::min(lo, 0.0f);
    p.zero_point = std::clamp(static_cast<float>(qmin) - RoundHalfEven(mn / p.scale), float(qmin), float(qmax));
  }
  return p;
}

ScalarParams OneParams(float lo, float hi, const QuantSpec& spec, Rounder r) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {1.0f, 0.0f};
  const DType el = spec.ElementType();
  const float amax = std::max(std::fabs(lo), std::fabs(hi));
  if (spec.IsMx()) return {kernels::Pow2(kernels::MxSharedExponent(amax, MxArgsOf(spec))), 0.0f};
  if (IsFloatFormat(el)) {
    const float s = r(amax / kernels::Traits(*ElemFormatOf(el)).max);
    return {s == 0.0f ? r(kEps) : s, 0.0f};
  }
  ScalarParams p = IntegerParams(lo, hi, spec, r);
  if (spec.scale_type == ScaleType::kPof2) p = ToPowerOfTwo(p, lo, spec);
  return p;
}

}  // namespace

QuantParams Nvfp4Params(const at::Tensor& block_amax, float global_amax) {
  const at::Tensor a = block_amax.to(at::kFloat).contiguous();
  const float g = kernels::Nvfp4GlobalScale(global_amax);
  at::Tensor scale = at::empty(a.sizes(), at::kFloat);
  const float* ap = a.data_ptr<float>();
  float* sp = scale.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) sp[i] = kernels::element::Nvfp4BlockScale(ap[i], g);
  return QuantParams{scale, at::zeros(a.sizes(), at::kInt), at::scalar_tensor(g, at::kFloat)};
}

at::ScalarType ScaleDtypeFor(const QuantSpec& spec, at::ScalarType observed) {
  if (spec.IsMx() || spec.IsNvfp4()) return at::kFloat;
  switch (spec.scale_type) {
    case ScaleType::kFloat:
      return observed;
    case ScaleType::kFloat16:
      return at::kHalf;
    case ScaleType::kBFloat16:
      return at::kBFloat16;
    case ScaleType::kFloat32:
    case ScaleType::kPof2:
      return at::kFloat;
  }
  return at::kFloat;
}

absl::StatusOr<QuantParams> ComputeQuantParams(const at::Tensor& min, const at::Tensor& max, const QuantSpec& spec) {
  if (auto st = ValidateSpecForNumerics(spec); !st.ok()) return st;
  if (IsCastType(spec.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("dtype: ", std::string(Name(spec.dtype)), " has no scale"));
  }
  if (!min.defined() || !max.defined() || min.sizes() != max.sizes()) {
    return absl::InvalidArgumentError(absl::StrCat("min/max: shapes differ (", ShapeString(min.sizes()), " vs ",
                                                   ShapeString(max.sizes()), ")"));
  }
  if (!IsSupportedInputDtype(min.scalar_type()) || min.scalar_type() != max.scalar_type()) {
    return absl::InvalidArgumentError(absl::StrCat("min/max: dtype ", c10::toString(min.scalar_type()),
                                                   " is not float32, bfloat16 or float16"));
  }
  if (spec.IsNvfp4()) {
    // The global amax is the largest block amax (the tensor's own: fused shards share theirs via Nvfp4Params).
    const at::Tensor amax = at::maximum(min.to(at::kFloat).abs(), max.to(at::kFloat).abs());
    const at::Tensor finite = at::where(at::isnan(amax), at::zeros_like(amax), amax);
    return Nvfp4Params(finite, finite.numel() == 0 ? 0.0f : finite.max().item<float>());
  }
  const at::ScalarType scale_dtype = ScaleDtypeFor(spec, min.scalar_type());
  // scale_type float computes in the model's dtype; explicit types compute in float32 and cast at the end.
  const Rounder r = spec.scale_type == ScaleType::kFloat ? RounderFor(scale_dtype) : &Identity;
  const at::Tensor lo = min.to(at::kFloat).contiguous();
  const at::Tensor hi = max.to(at::kFloat).contiguous();
  at::Tensor scale = at::empty(min.sizes(), at::kFloat);
  at::Tensor zp = at::empty(min.sizes(), at::kFloat);
  const float* lp = lo.data_ptr<float>();
  const float* hp = hi.data_ptr<float>();
  float* sp = scale.data_ptr<float>();
  float* zpp = zp.data_ptr<float>();
  for (int64_t i = 0; i < lo.numel(); ++i) {
    const ScalarParams p = OneParams(lp[i], hp[i], spec, r);
    sp[i] = p.scale;
    zpp[i] = p.zero_point;
  }
  const bool float_zp = spec.zero_point_type == ZeroPointType::kFloat32 && !spec.symmetric;
  return QuantParams{scale.to(scale_dtype), float_zp ? zp : zp.to(at::kInt)};
}

QuantParams OnHost(const QuantParams& params) {
  const auto host = [](const at::Tensor& t) { return t.defined() ? t.cpu() : t; };
  return QuantParams{host(params.scale), host(params.zero_point), host(params.global_scale)};
}

}  // namespace quark
