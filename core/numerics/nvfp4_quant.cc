#include "core/numerics/nvfp4_quant.h"

#include "core/numerics/dispatch.h"
#include "core/numerics/quant_kernels.h"
#include "core/numerics/quant_layout.h"
#include "core/numerics/range_reduce.h"
#include "kernels/cpu/nvfp4_kernels.h"

namespace quark {
namespace {

int64_t RowsOf(const at::Tensor& x) {
  const int64_t len = x.dim() == 0 ? 1 : x.size(-1);
  return len == 0 ? 0 : x.numel() / len;
}

// The global scale and (or undefined) float32 block scales, on x's device, to use for x (contiguous).
std::pair<float, at::Tensor> ScalesFor(const at::Tensor& x, const QuantParams* params) {
  const float g = params && params->global_scale.defined() ? params->global_scale.item<float>()
                                                            : kernels::Nvfp4GlobalScale(Nvfp4AmaxOf(x));
  at::Tensor blk;
  if (params && params->scale.defined()) blk = params->scale.to(x.device(), at::kFloat).contiguous();
  return {g, blk};
}

}  // namespace

float Nvfp4AmaxOf(const at::Tensor& x) {
  if (!x.device().is_cpu()) {
    // On a device: its own reduction (exact, as any max), NaN ignored as the CPU kernel does; one scalar comes back.
    if (x.numel() == 0) return 0.0f;
    const at::Tensor a = x.abs();
    return at::where(at::isnan(a), at::zeros_like(a), a).max().to(at::kFloat).item<float>();
  }
  const at::Tensor c = x.contiguous();
  return DispatchFloating(c.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return kernels::Nvfp4Amax<T>(c.data_ptr<T>(), c.numel());
  });
}

absl::StatusOr<QuantParams> Nvfp4ParamsOf(const at::Tensor& w, const QuantSpec& spec, float global_amax) {
  auto layout = ResolveLayout(spec, TensorRole::kWeight, w.sizes());
  if (!layout.ok()) return layout.status();
  auto [mn, mx] = MinMaxOf(w, *layout);
  const at::Tensor amax = at::maximum(mn.to(at::kCPU, at::kFloat).abs(), mx.to(at::kCPU, at::kFloat).abs());
  return Nvfp4Params(at::where(at::isnan(amax), at::zeros_like(amax), amax), global_amax);
}

at::Tensor Nvfp4FakeQuantize(const at::Tensor& x, const QuantParams* params, at::Tensor* dest) {
  const int64_t len = x.dim() == 0 ? 1 : x.size(-1);
  // The kernels of x's device (the CPU's, or CUDA's with the same element math); a device without an NVFP4 kernel
  // computes on the CPU and gets the result copied back.
  const QuantKernels& kernels = QuantKernelsFor(x.device());
  const at::Tensor in = x.contiguous();
  const auto [g, blk] = ScalesFor(in, params);
  const bool direct = dest && dest->device() == x.device();
  at::Tensor out = direct ? *dest : at::empty(in.sizes(), in.options());
  if (kernels.FakeNvfp4(in, out, RowsOf(in), len, g, blk)) {
    if (dest && !direct) dest->copy_(out);
    return dest ? *dest : out;
  }
  const at::Tensor host = in.to(at::kCPU);
  at::Tensor host_out = at::empty(host.sizes(), host.options());
  CpuQuantKernels().FakeNvfp4(host, host_out, RowsOf(host), len, g, blk.defined() ? blk.to(at::kCPU) : blk);
  if (dest) {
    dest->copy_(host_out);
    return *dest;
  }
  return host_out.to(x.device());
}

RealQuantized Nvfp4QuantizeReal(const at::Tensor& x, const QuantParams* params) {
  const at::Tensor in = x.to(at::kCPU).contiguous();
  const auto [g, blk] = ScalesFor(in, params);
  const int64_t len = in.dim() == 0 ? 1 : in.size(-1);
  std::vector<int64_t> scale_shape(in.sizes().begin(), in.sizes().end());
  scale_shape.back() = len / kernels::kNvfp4Group;
  at::Tensor codes = at::empty(in.sizes(), at::kByte);
  at::Tensor scale = at::empty(scale_shape, at::kByte);
  DispatchFloating(in.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::Nvfp4Quantize<T>(in.data_ptr<T>(), codes.data_ptr<uint8_t>(), scale.data_ptr<uint8_t>(), RowsOf(in), len,
                              g, blk.defined() ? blk.data_ptr<float>() : nullptr);
  });
  return RealQuantized{codes, scale, at::zeros(scale_shape, at::kInt), at::scalar_tensor(g, at::kFloat)};
}

at::Tensor Nvfp4DequantizeReal(const RealQuantized& q, at::ScalarType dtype) {
  const at::Tensor codes = q.codes.contiguous();
  const at::Tensor scale = q.scale.contiguous();
  at::Tensor out = at::empty(codes.sizes(), at::TensorOptions().dtype(dtype));
  const int64_t len = codes.dim() == 0 ? 1 : codes.size(-1);
  const float g = q.global_scale.item<float>();
  DispatchFloating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::Nvfp4Dequantize<T>(codes.data_ptr<uint8_t>(), scale.data_ptr<uint8_t>(), out.data_ptr<T>(), RowsOf(codes),
                                len, g);
  });
  return out;
}

}  // namespace quark
