#include "core/numerics/progressive_quant.h"

#include "absl/strings/str_cat.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/quant_layout.h"

namespace quark {
namespace {

QuantParams UnitScale() { return QuantParams{at::ones({}, at::kFloat), at::zeros({}, at::kInt), at::Tensor()}; }

QuantParams SecondStageParams(const QuantParams& p) { return QuantParams{p.scale, p.zero_point, at::Tensor()}; }

absl::StatusOr<at::Tensor> FirstStageValues(const at::Tensor& x, const QuantParams& params) {
  if (!params.global_scale.defined() || params.global_scale.numel() != 1) {
    return absl::InvalidArgumentError("global_scale: W4A8 needs the fp8 first stage's float32 scale");
  }
  return Fp8StageValues(x, params.global_scale);
}

}  // namespace

QuantSpec Fp8FirstStageSpec() {
  QuantSpec s;
  s.dtype = DType::kFp8E4M3;
  s.qscheme = QScheme::kPerTensor;
  s.scale_type = ScaleType::kFloat32;
  return s;
}

QuantSpec SecondStageSpec(const QuantSpec& spec) {
  QuantSpec s = spec;
  s.fp8_first_stage = false;
  return s;
}

absl::StatusOr<at::Tensor> Fp8StageValues(const at::Tensor& x, const at::Tensor& s0) {
  const QuantSpec fp8 = Fp8FirstStageSpec();
  const QuantParams p0{s0.to(at::kCPU, at::kFloat).reshape({}), at::zeros({}, at::kInt), at::Tensor()};
  auto codes = QuantizeReal(x, fp8, p0, TensorRole::kWeight);
  if (!codes.ok()) return codes.status();
  const QuantParams unit = UnitScale();
  return Dequantize(RealQuantized{codes->codes, unit.scale, unit.zero_point}, fp8, at::kFloat, TensorRole::kWeight);
}

absl::StatusOr<QuantParams> ProgressiveParamsOf(const at::Tensor& x, const QuantSpec& spec, TensorRole role) {
  auto p0 = ParamsOf(x, Fp8FirstStageSpec(), role);
  if (!p0.ok()) return p0.status();
  auto v = Fp8StageValues(x, p0->scale);
  if (!v.ok()) return v.status();
  auto p1 = ParamsOf(*v, SecondStageSpec(spec), role);
  if (!p1.ok()) return p1.status();
  p1->global_scale = p0->scale.to(at::kFloat).reshape({});
  return p1;
}

absl::Status CheckProgressiveParams(const QuantParams& params, const std::vector<int64_t>& param_shape) {
  if (!params.global_scale.defined() || params.global_scale.numel() != 1) {
    return absl::InvalidArgumentError("global_scale: W4A8 needs the fp8 first stage's float32 scale");
  }
  return CheckParams(params, param_shape);
}

absl::StatusOr<at::Tensor> ProgressiveFakeQuantize(const at::Tensor& x, const QuantSpec& spec,
                                                   const QuantParams& params, TensorRole role) {
  auto q = ProgressiveQuantizeReal(x, spec, params, role);
  if (!q.ok()) return q.status();
  auto out = ProgressiveDequantize(*q, spec, x.scalar_type(), role);
  if (!out.ok()) return out.status();
  return out->to(x.device());
}

absl::StatusOr<RealQuantized> ProgressiveQuantizeReal(const at::Tensor& x, const QuantSpec& spec,
                                                      const QuantParams& params, TensorRole role) {
  if (auto st = CheckInput(x); !st.ok()) return st;
  auto layout = ResolveLayout(spec, role, x.sizes());
  if (!layout.ok()) return layout.status();
  if (auto st = CheckProgressiveParams(params, layout->param_shape); !st.ok()) return st;
  auto v = FirstStageValues(x, params);
  if (!v.ok()) return v.status();
  auto q = QuantizeReal(*v, SecondStageSpec(spec), SecondStageParams(params), role);
  if (!q.ok()) return q.status();
  q->global_scale = params.global_scale.to(at::kCPU, at::kFloat).reshape({});
  return q;
}

absl::StatusOr<at::Tensor> ProgressiveDequantize(const RealQuantized& q, const QuantSpec& spec, at::ScalarType dtype,
                                                 TensorRole role) {
  if (!q.global_scale.defined() || q.global_scale.numel() != 1) {
    return absl::InvalidArgumentError("global_scale: W4A8 needs the fp8 first stage's float32 scale");
  }
  auto w1 = Dequantize(RealQuantized{q.codes, q.scale, q.zero_point}, SecondStageSpec(spec), at::kFloat, role);
  if (!w1.ok()) return w1.status();
  return (*w1 * q.global_scale.to(at::kCPU, at::kFloat).reshape({})).to(dtype);
}

}  // namespace quark
