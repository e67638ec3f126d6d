#include "core/numerics/real_quant.h"

#include "absl/strings/str_cat.h"
#include "core/config/e8m0_tiles.h"
#include "core/numerics/dispatch.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/format_map.h"
#include "core/numerics/nvfp4_quant.h"
#include "core/numerics/packing.h"
#include "core/numerics/progressive_quant.h"
#include "core/numerics/quant_layout.h"
#include "kernels/cpu/affine_kernels.h"
#include "kernels/cpu/float_kernels.h"
#include "kernels/cpu/mx_kernels.h"

namespace quark {
namespace {

int64_t RowLength(const at::Tensor& t) { return t.dim() == 0 ? 1 : t.size(-1); }

absl::StatusOr<RealQuantized> QuantizeMx(const at::Tensor& x, const QuantSpec& spec, const QuantLayout& layout) {
  const at::Tensor in = KernelInput(x, layout);
  const int64_t len = RowLength(in);
  const int64_t rows = len == 0 ? 0 : in.numel() / len;
  at::Tensor codes = at::empty(in.sizes(), at::kByte);
  at::Tensor e8m0 = at::empty(layout.param_shape, at::kByte);
  const kernels::MxArgs args = MxArgsOf(spec);
  DispatchFloating(x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::MxQuantize<T>(in.data_ptr<T>(), codes.data_ptr<uint8_t>(), e8m0.data_ptr<uint8_t>(), rows, len, args);
  });
  if (args.element == kernels::ElemFormat::kInt8) codes = codes.view(at::kChar);
  return RealQuantized{FromKernelLayout(codes, layout, x.dim()), e8m0, at::zeros(layout.param_shape, at::kInt)};
}

at::Tensor QuantizeScaled(const at::Tensor& x, const QuantSpec& spec, const QuantLayout& layout,
                          const QuantParams& p) {
  const at::Tensor in = KernelInput(x, layout);
  const kernels::ChannelLayout cl = ChannelLayoutOf(in, layout);
  const at::Tensor scale = p.scale.to(at::kFloat).contiguous();
  const at::Tensor zp = p.zero_point.to(at::kFloat).contiguous();
  const DType el = spec.ElementType();
  const bool is_signed_int = IsIntegerType(el) && !IsUnsigned(el);
  at::Tensor codes = at::empty(in.sizes(), is_signed_int ? at::kChar : at::kByte);
  DispatchFloating(x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (IsFloatFormat(el)) {
      kernels::QuantizeFloat<T>(in.data_ptr<T>(), codes.data_ptr<uint8_t>(), cl, scale.data_ptr<float>(),
                                *ElemFormatOf(el));
      return;
    }
    const kernels::AffineArgs args = AffineArgsOf(spec, scale, zp, p.zero_point.scalar_type() != at::kInt);
    if (is_signed_int) {
      kernels::QuantizeAffine<T, int8_t>(in.data_ptr<T>(), codes.data_ptr<int8_t>(), cl, args);
    } else {
      kernels::QuantizeAffine<T, uint8_t>(in.data_ptr<T>(), codes.data_ptr<uint8_t>(), cl, args);
    }
  });
  return FromKernelLayout(codes, layout, x.dim());
}

template <typename T>
void DequantizeInto(const at::Tensor& codes, at::Tensor& out, const QuantSpec& spec, const QuantLayout& layout,
                    const RealQuantized& q) {
  const DType el = spec.ElementType();
  if (IsOcpMx(spec)) {
    const int64_t len = RowLength(codes);
    const at::Tensor bytes = codes.scalar_type() == at::kChar ? codes.view(at::kByte) : codes;
    const at::Tensor e8m0 = q.scale.contiguous();
    kernels::MxDequantize<T>(bytes.data_ptr<uint8_t>(), e8m0.data_ptr<uint8_t>(), out.data_ptr<T>(),
                             len == 0 ? 0 : codes.numel() / len, len, MxArgsOf(spec));
    return;
  }
  const kernels::ChannelLayout cl = ChannelLayoutOf(codes, layout);
  // #30 E8M0 tiles: the bytes are exponents (2^(e - 127)), not values.
  const at::Tensor scale = IsE8m0Tiles(spec) ? E8M0ToScale(q.scale) : q.scale.to(at::kFloat).contiguous();
  const at::Tensor zp = q.zero_point.to(at::kFloat).contiguous();
  if (IsFloatFormat(el)) {
    kernels::DequantizeFloat<T>(codes.data_ptr<uint8_t>(), out.data_ptr<T>(), cl, scale.data_ptr<float>(),
                                *ElemFormatOf(el));
    return;
  }
  const kernels::AffineArgs args = AffineArgsOf(spec, scale, zp, q.zero_point.scalar_type() != at::kInt);
  if (codes.scalar_type() == at::kChar) {
    kernels::DequantizeAffine<int8_t, T>(codes.data_ptr<int8_t>(), out.data_ptr<T>(), cl, args);
  } else {
    kernels::DequantizeAffine<uint8_t, T>(codes.data_ptr<uint8_t>(), out.data_ptr<T>(), cl, args);
  }
}

}  // namespace

absl::StatusOr<RealQuantized> QuantizeReal(const at::Tensor& device_x, const QuantSpec& spec,
                                           const QuantParams& device_params, TensorRole role) {
  if (auto st = CheckInput(device_x); !st.ok()) return st;
  // Codes are what the exports write: they are made in host memory, from a host copy of a tensor on a device.
  const at::Tensor x = device_x.cpu();
  const QuantParams params = OnHost(device_params);
  if (IsCastType(spec.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("dtype: ", std::string(Name(spec.dtype)), " is a cast; it has no codes"));
  }
  auto layout = ResolveLayout(spec, role, x.sizes());
  if (!layout.ok()) return layout.status();
  if (IsOcpMx(spec)) return QuantizeMx(x, spec, *layout);
  if (spec.IsProgressive()) return ProgressiveQuantizeReal(x, spec, params, role);  // #30 W4A8
  if (spec.IsNvfp4()) {
    if (auto st = CheckNvfp4Params(params, layout->param_shape); !st.ok()) return st;
    return Nvfp4QuantizeReal(x, &params);
  }
  if (auto st = CheckParams(params, layout->param_shape); !st.ok()) return st;
  if (IsE8m0Tiles(spec)) {  // #30: the codes of the power-of-two tile scales, which are kept as their E8M0 bytes
    auto e8m0 = ScaleToE8M0(params.scale);
    if (!e8m0.ok()) return e8m0.status();
    return RealQuantized{QuantizeScaled(x, spec, *layout, params), e8m0->reshape(layout->param_shape),
                         at::zeros(layout->param_shape, at::kInt)};
  }
  return RealQuantized{QuantizeScaled(x, spec, *layout, params), params.scale.reshape(layout->param_shape),
                       params.zero_point.reshape(layout->param_shape)};
}

absl::StatusOr<at::Tensor> Dequantize(const RealQuantized& q, const QuantSpec& spec, at::ScalarType dtype,
                                      TensorRole role) {
  if (!IsSupportedInputDtype(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("dtype: ", c10::toString(dtype), " is not a float dtype"));
  }
  if (!q.codes.defined()) return absl::InvalidArgumentError("codes: undefined tensor");
  auto layout = ResolveLayout(spec, role, q.codes.sizes());
  if (!layout.ok()) return layout.status();
  if (IsCastType(spec.dtype)) return absl::InvalidArgumentError("dtype: a cast has no codes");
  if (spec.IsProgressive()) return ProgressiveDequantize(q, spec, dtype, role);  // #30 W4A8
  if (spec.IsNvfp4()) {
    if (q.codes.scalar_type() != at::kByte || !q.scale.defined() || q.scale.scalar_type() != at::kByte) {
      return absl::InvalidArgumentError("codes / scale: NVFP4 needs uint8 codes and uint8 float8_e4m3fn scales");
    }
    if (!q.global_scale.defined() || q.global_scale.numel() != 1) {
      return absl::InvalidArgumentError("global_scale: NVFP4 needs one float32 global scale");
    }
    if (auto st = CheckParams(QuantParams{q.scale, q.scale}, layout->param_shape); !st.ok()) return st;
    return Nvfp4DequantizeReal(q, dtype);
  }
  if (auto st = CheckParams(QuantParams{q.scale, q.zero_point}, layout->param_shape); !st.ok()) return st;
  const bool want_byte = spec.IsMx() || IsFloatFormat(spec.ElementType()) || IsUnsigned(spec.ElementType());
  const bool is_byte = q.codes.scalar_type() == at::kByte;
  const bool mx_int = spec.IsMx() && spec.ElementType() == DType::kInt8;
  if (!mx_int && want_byte != is_byte) {
    return absl::InvalidArgumentError(absl::StrCat("codes: dtype ", c10::toString(q.codes.scalar_type()),
                                                   " does not match ", std::string(Name(spec.ElementType()))));
  }
  if (spec.IsMx() && q.scale.scalar_type() != at::kByte) {
    return absl::InvalidArgumentError("scale: MX scales must be uint8 E8M0");
  }
  const at::Tensor codes = KernelInput(q.codes, *layout);
  at::Tensor out = at::empty(codes.sizes(), dtype);
  DispatchFloating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DequantizeInto<T>(codes, out, spec, *layout, q);
  });
  return FromKernelLayout(out, *layout, q.codes.dim());
}

}  // namespace quark
