#include "core/numerics/minmax_observer.h"

#include "absl/strings/str_cat.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/range_reduce.h"

namespace quark {

absl::Status MinMaxObserver::Observe(const at::Tensor& x) {
  if (auto st = CheckInput(x); !st.ok()) return st;
  if (x.numel() == 0) return absl::InvalidArgumentError("input: empty calibration batch");
  auto layout = ResolveLayout(spec_, role_, x.sizes());
  if (!layout.ok()) return layout.status();
  if (param_shape_ && *param_shape_ != layout->param_shape) {
    return absl::InvalidArgumentError(absl::StrCat("input: shape ", ShapeString(x.sizes()), " gives parameters ",
                                                   ShapeString(layout->param_shape), ", earlier batches gave ",
                                                   ShapeString(*param_shape_)));
  }
  if (min_.defined() && min_.scalar_type() != x.scalar_type()) {
    return absl::InvalidArgumentError(absl::StrCat("input: dtype ", c10::toString(x.scalar_type()),
                                                   " differs from earlier batches (", c10::toString(min_.scalar_type()),
                                                   ")"));
  }
  auto [mn, mx] = MinMaxOf(x, *layout);
  if (!min_.defined()) {
    min_ = mn;
    max_ = mx;
    param_shape_ = layout->param_shape;
  } else {
    min_ = at::minimum(min_, mn);
    max_ = at::maximum(max_, mx);
  }
  ++batches_;
  return absl::OkStatus();
}

absl::StatusOr<std::pair<at::Tensor, at::Tensor>> MinMaxObserver::Range() const {
  if (!min_.defined()) return absl::FailedPreconditionError("observer: no calibration batch observed");
  return std::pair{min_, max_};
}

absl::StatusOr<QuantParams> MinMaxObserver::ComputeParams() const {
  auto range = Range();
  if (!range.ok()) return range.status();
  return ComputeQuantParams(range->first, range->second, spec_);
}

}  // namespace quark
