#include "core/numerics/range_reduce.h"

#include "core/numerics/dispatch.h"
#include "kernels/cpu/mx_kernels.h"
#include "kernels/cpu/reduce_kernels.h"

namespace quark {

std::pair<at::Tensor, at::Tensor> MinMaxOf(const at::Tensor& x, const QuantLayout& layout) {
  const at::Tensor in = KernelInput(x, layout);
  at::Tensor mn = at::empty(layout.param_shape, at::kFloat);
  at::Tensor mx = at::empty(layout.param_shape, at::kFloat);
  DispatchFloating(x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (layout.granularity == Granularity::kMxBlock) {
      const int64_t len = in.dim() == 0 ? 1 : in.size(-1);
      kernels::MxBlockAmax<T>(in.data_ptr<T>(), len == 0 ? 0 : in.numel() / len, len, mx.data_ptr<float>());
      mn = mx.neg();
      return;
    }
    kernels::ChannelMinMax<T>(in.data_ptr<T>(), ChannelLayoutOf(in, layout), mn.data_ptr<float>(),
                              mx.data_ptr<float>());
  });
  // Exact: the extremes are values of x.
  return {mn.to(x.scalar_type()), mx.to(x.scalar_type())};
}

}  // namespace quark
