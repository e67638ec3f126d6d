#include "core/numerics/fake_quant.h"

#include <cmath>
#include <tuple>

#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"
#include "core/config/e8m0_tiles.h"
#include "core/numerics/dispatch.h"
#include "core/numerics/format_map.h"
#include "core/numerics/nvfp4_quant.h"
#include "core/numerics/observer.h"
#include "core/numerics/progressive_quant.h"
#include "core/numerics/quant_kernels.h"
#include "core/numerics/quant_layout.h"
#include "core/numerics/range_reduce.h"
#include "kernels/element/element_ops.h"

namespace quark {
namespace {

at::Tensor CastRoundTrip(const at::Tensor& x, DType dtype) {
  return x.to(dtype == DType::kBFloat16 ? at::kBFloat16 : at::kHalf).to(x.scalar_type()).contiguous();
}

// Scale exponents of MX params (kernels/element's MxScaleExponent, which GPTQ's fused MXINT8 blocks read too). One
// exponent per 32 elements: done in parallel, as it would otherwise be a serial tail of every MX fake quantization.
at::Tensor MxExponents(const at::Tensor& scale) {
  const at::Tensor s = scale.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor exps = at::empty(s.sizes(), at::kChar);
  const float* sp = s.data_ptr<float>();
  int8_t* ep = exps.data_ptr<int8_t>();
  at::parallel_for(0, s.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ep[i] = static_cast<int8_t>(kernels::element::MxScaleExponent(sp[i]));
  });
  return exps;
}

// Output buffer of the kernels: `dest` itself when the kernel layout is x's own layout, else a temporary.
at::Tensor KernelOutput(const at::Tensor& in, const at::Tensor* dest, const QuantLayout& layout, int64_t dim) {
  if (dest && !layout.MovesAxisLast(dim)) return *dest;
  return at::empty(in.sizes(), in.options());
}

at::Tensor Finish(const at::Tensor& out, const at::Tensor* dest, const QuantLayout& layout, int64_t dim) {
  if (!layout.MovesAxisLast(dim)) return out;
  at::Tensor back = FromKernelLayout(out, layout, dim);
  if (dest) const_cast<at::Tensor*>(dest)->copy_(back);
  return back;
}

at::Tensor RunMx(const at::Tensor& x, const QuantSpec& spec, const QuantLayout& layout, const at::Tensor* scale,
                 const at::Tensor* dest = nullptr) {
  const at::Tensor in = KernelInput(x, layout);
  at::Tensor out = KernelOutput(in, dest, layout, x.dim());
  const int64_t len = in.dim() == 0 ? 1 : in.size(-1);
  const int64_t rows = len == 0 ? 0 : in.numel() / len;
  const at::Tensor exps = scale ? MxExponents(*scale).to(x.device()) : at::Tensor();
  QuantKernelsFor(x.device()).FakeMx(in, out, rows, len, MxArgsOf(spec), exps);
  return Finish(out, dest, layout, x.dim());
}

at::Tensor RunScaled(const at::Tensor& x, const QuantSpec& spec, const QuantLayout& layout, const QuantParams& p,
                     const at::Tensor* dest = nullptr) {
  const at::Tensor in = KernelInput(x, layout);
  at::Tensor out = KernelOutput(in, dest, layout, x.dim());
  const kernels::ChannelLayout cl = ChannelLayoutOf(in, layout);
  const at::Tensor scale = p.scale.to(x.device(), at::kFloat).contiguous();
  const QuantKernels& kernels = QuantKernelsFor(x.device());
  if (IsFloatFormat(spec.ElementType())) {
    kernels.FakeFloat(in, out, cl, scale, *ElemFormatOf(spec.ElementType()));
  } else {
    AffineKernelArgs args;
    args.scale = scale;
    args.zero_point = p.zero_point.to(x.device(), at::kFloat).contiguous();
    std::tie(args.qmin, args.qmax) = IntegerRange(spec.ElementType());
    args.round = RoundModeOf(spec.round_method);
    args.float_zero_point = p.zero_point.scalar_type() != at::kInt;
    kernels.FakeAffine(in, out, cl, args);
  }
  return Finish(out, dest, layout, x.dim());
}

}  // namespace

absl::Status CheckInput(const at::Tensor& x) {
  if (!x.defined()) return absl::InvalidArgumentError("input: undefined tensor");
  if (!IsSupportedInputDtype(x.scalar_type())) {
    return absl::InvalidArgumentError(
        absl::StrCat("input: dtype ", c10::toString(x.scalar_type()), " is not float32, bfloat16 or float16"));
  }
  return absl::OkStatus();
}

absl::Status CheckParams(const QuantParams& params, const std::vector<int64_t>& param_shape) {
  int64_t expected = 1;
  for (int64_t d : param_shape) expected *= d;
  for (const auto& [name, t] : {std::pair{"scale", &params.scale}, std::pair{"zero_point", &params.zero_point}}) {
    if (!t->defined()) return absl::InvalidArgumentError(absl::StrCat(name, ": undefined tensor"));
    if (t->numel() != expected) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": shape ", ShapeString(t->sizes()),
                                                     " does not match the expected ", ShapeString(param_shape)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNvfp4Params(const QuantParams& params, const std::vector<int64_t>& param_shape) {
  if (!params.global_scale.defined() || params.global_scale.numel() != 1) {
    return absl::InvalidArgumentError("global_scale: NVFP4 needs one float32 global scale");
  }
  if (!params.scale.defined()) return absl::OkStatus();  // dynamic groups
  return CheckParams(QuantParams{params.scale, params.scale}, param_shape);
}

absl::StatusOr<at::Tensor> FakeQuantize(const at::Tensor& x, const QuantSpec& spec, const QuantParams& params,
                                        TensorRole role) {
  if (auto st = CheckInput(x); !st.ok()) return st;
  auto layout = ResolveLayout(spec, role, x.sizes());
  if (!layout.ok()) return layout.status();
  if (IsCastType(spec.dtype)) return CastRoundTrip(x, spec.dtype);
  if (spec.IsProgressive()) return ProgressiveFakeQuantize(x, spec, params, role);  // #30 W4A8
  if (spec.IsNvfp4()) {
    if (auto st = CheckNvfp4Params(params, layout->param_shape); !st.ok()) return st;
    return Nvfp4FakeQuantize(x, &params);
  }
  if (auto st = CheckParams(params, layout->param_shape); !st.ok()) return st;
  if (x.numel() == 0) return x.contiguous().clone();
  // #30 E8M0 tiles run the float kernels with their power-of-two tile scales (x / 2^e is exact, as MX's x * 2^-e).
  if (IsOcpMx(spec)) return RunMx(x, spec, *layout, &params.scale);
  return RunScaled(x, spec, *layout, params);
}

absl::Status FakeQuantizeInto(const at::Tensor& x, const QuantSpec& spec, const QuantParams& params, at::Tensor& out,
                              TensorRole role) {
  if (auto st = CheckInput(x); !st.ok()) return st;
  if (!out.defined() || out.sizes() != x.sizes() || out.scalar_type() != x.scalar_type() || !out.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat("out: must be a contiguous ", c10::toString(x.scalar_type()),
                                                   " tensor of shape ", ShapeString(x.sizes())));
  }
  auto layout = ResolveLayout(spec, role, x.sizes());
  if (!layout.ok()) return layout.status();
  if (IsCastType(spec.dtype)) {
    out.copy_(CastRoundTrip(x, spec.dtype));
    return absl::OkStatus();
  }
  if (spec.IsProgressive()) {  // #30 W4A8
    auto y = ProgressiveFakeQuantize(x, spec, params, role);
    if (!y.ok()) return y.status();
    out.copy_(*y);
    return absl::OkStatus();
  }
  if (spec.IsNvfp4()) {
    if (auto st = CheckNvfp4Params(params, layout->param_shape); !st.ok()) return st;
    Nvfp4FakeQuantize(x, &params, &out);
    return absl::OkStatus();
  }
  if (auto st = CheckParams(params, layout->param_shape); !st.ok()) return st;
  if (x.numel() == 0) return absl::OkStatus();
  if (IsOcpMx(spec)) {
    RunMx(x, spec, *layout, &params.scale, &out);
  } else {
    RunScaled(x, spec, *layout, params, &out);
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> FakeQuantizeDynamic(const at::Tensor& x, const QuantSpec& spec, TensorRole role) {
  if (auto st = CheckInput(x); !st.ok()) return st;
  auto layout = ResolveLayout(spec, role, x.sizes());
  if (!layout.ok()) return layout.status();
  if (IsCastType(spec.dtype)) return CastRoundTrip(x, spec.dtype);
  if (x.numel() == 0) return x.contiguous().clone();
  if (spec.IsProgressive()) {  // #30 W4A8 (weights are static; kept for completeness of the dispatch)
    auto params = ProgressiveParamsOf(x, spec, role);
    if (!params.ok()) return params.status();
    return ProgressiveFakeQuantize(x, spec, *params, role);
  }
  if (spec.IsNvfp4()) return Nvfp4FakeQuantize(x, nullptr);
  // MX computes each block's scale inside the kernel: one pass.
  if (IsOcpMx(spec)) return RunMx(x, spec, *layout, nullptr);
  auto params = ParamsOf(x, spec, role);
  if (!params.ok()) return params.status();
  return RunScaled(x, spec, *layout, *params);
}

absl::StatusOr<QuantParams> ParamsOf(const at::Tensor& x, const QuantSpec& spec, TensorRole role) {
  if (auto st = CheckInput(x); !st.ok()) return st;
  if (spec.IsProgressive()) return ProgressiveParamsOf(x, spec, role);  // #30 W4A8
  if (spec.observer == ObserverKind::kMinMax || spec.IsMx()) {
    auto layout = ResolveLayout(spec, role, x.sizes());
    if (!layout.ok()) return layout.status();
    if (x.numel() == 0) return absl::InvalidArgumentError("input: empty tensor has no range");
    auto [mn, mx] = MinMaxOf(x, *layout);
    return ComputeQuantParams(mn, mx, spec);
  }
  QuantSpec static_spec = spec;
  static_spec.is_dynamic = false;
  auto observer = MakeObserver(static_spec, role);
  if (!observer.ok()) return observer.status();
  if (auto st = (*observer)->Observe(x); !st.ok()) return st;
  return (*observer)->ComputeParams();
}

}  // namespace quark
