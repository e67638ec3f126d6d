#include "core/numerics/range_reduce.h"

#include "core/numerics/quant_kernels.h"

namespace quark {

std::pair<at::Tensor, at::Tensor> MinMaxOf(const at::Tensor& x, const QuantLayout& layout) {
  const at::Tensor in = KernelInput(x, layout);
  const QuantKernels& kernels = QuantKernelsFor(x.device());
  at::Tensor mn;
  at::Tensor mx;
  if (layout.granularity == Granularity::kMxBlock) {
    const int64_t len = in.dim() == 0 ? 1 : in.size(-1);
    kernels.MxBlockAmax(in, len == 0 ? 0 : in.numel() / len, len, mx);
    mn = mx.neg();
  } else {
    kernels.ChannelMinMax(in, ChannelLayoutOf(in, layout), mn, mx);
  }
  // Exact: the extremes are values of x. On the host, whatever x's device: parameters are small, and
  // ComputeQuantParams works on them there.
  return {mn.reshape(layout.param_shape).to(x.scalar_type()), mx.reshape(layout.param_shape).to(x.scalar_type())};
}

}  // namespace quark
