// Calibration observers (numerics.md, "Observers"): they see static calibration batches and turn what they saw into
// QuantParams. Not thread-safe: one observer belongs to one tensor of one layer.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/tensor_role.h"

namespace quark {

class Observer {
 public:
  virtual ~Observer() = default;

  /// Adds one calibration batch (float32 / bfloat16 / float16 on CPU). Every batch must give the same parameter
  /// shape; INVALID_ARGUMENT otherwise, naming both shapes.
  virtual absl::Status Observe(const at::Tensor& x) = 0;

  /// Parameters from everything observed; FAILED_PRECONDITION before the first batch.
  virtual absl::StatusOr<QuantParams> ComputeParams() const = 0;

  /// The (min, max) range the parameters are computed from, in the observed dtype (param shape).
  virtual absl::StatusOr<std::pair<at::Tensor, at::Tensor>> Range() const = 0;

  int64_t batches() const { return batches_; }

 protected:
  int64_t batches_ = 0;
};

/// MinMax for every granularity (MX: the block observer), Percentile and MSE for per_tensor.
/// INVALID_ARGUMENT for a dynamic spec (dynamic tensors are never observed) or an invalid combination.
absl::StatusOr<std::unique_ptr<Observer>> MakeObserver(const QuantSpec& spec, TensorRole role);

}  // namespace quark
