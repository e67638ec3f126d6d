// MinMax observer: elementwise running min and max across static calibration batches, at the spec's granularity
// (per tensor, channel, group; MX blocks: running per-block amax).
#pragma once

#include <optional>
#include <vector>

#include "core/numerics/observer.h"
#include "core/numerics/quant_layout.h"

namespace quark {

class MinMaxObserver : public Observer {
 public:
  MinMaxObserver(const QuantSpec& spec, TensorRole role) : spec_(spec), role_(role) {}

  absl::Status Observe(const at::Tensor& x) override;
  absl::StatusOr<QuantParams> ComputeParams() const override;
  absl::StatusOr<std::pair<at::Tensor, at::Tensor>> Range() const override;

 private:
  QuantSpec spec_;
  TensorRole role_;
  std::optional<std::vector<int64_t>> param_shape_;
  at::Tensor min_;
  at::Tensor max_;
};

/// MX block observer: per-block amax (a MinMaxObserver on an MX spec).
class MxBlockObserver : public MinMaxObserver {
 public:
  using MinMaxObserver::MinMaxObserver;
};

}  // namespace quark
