// The quantizer of one activation tensor of a module (its input or its output): static (observers calibrated on
// calibration batches, then frozen parameters), dynamic (parameters recomputed from every tensor) or a cast.
// Unlike TensorQuantizer it can also be built from known parameters (a reloaded export, a shared KV-cache scale).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/tensor_quantizer.h"

namespace quark::quantize {

class ActivationQuantizer {
 public:
  /// A quantizer that calibrates (static specs) or needs nothing (dynamic, casts).
  /// INVALID_ARGUMENT naming the field for a spec the numerics cannot run.
  static absl::StatusOr<std::unique_ptr<ActivationQuantizer>> Create(const QuantSpec& spec);
  /// A static quantizer with known parameters (already frozen).
  static absl::StatusOr<std::unique_ptr<ActivationQuantizer>> WithParams(const QuantSpec& spec, QuantParams params);

  /// True for a static spec (not dynamic, not a cast): its parameters come from calibration and are exported.
  bool is_static() const { return is_static_; }
  bool frozen() const { return params_.has_value(); }
  const QuantSpec& spec() const { return spec_; }
  /// The frozen parameters; nullptr when not static or not yet frozen.
  const QuantParams* params() const { return params_ ? &*params_ : nullptr; }

  /// Adds a calibration batch (static, not frozen); a no-op otherwise.
  absl::Status Observe(const at::Tensor& x);
  /// Fixes the parameters from what was observed; a no-op when not static or already frozen.
  absl::Status Freeze();
  /// Replaces the frozen parameters (the KV cache shares one scale between k_proj and v_proj).
  void SetParams(QuantParams params) { params_ = std::move(params); }

  /// x fake-quantized: frozen parameters (static), parameters of x (dynamic), or a cast there and back.
  /// FAILED_PRECONDITION for a static quantizer that is not frozen.
  absl::StatusOr<at::Tensor> Apply(const at::Tensor& x) const;

 private:
  explicit ActivationQuantizer(const QuantSpec& spec) : spec_(spec) {}
  QuantSpec spec_;
  bool is_static_ = false;
  std::unique_ptr<TensorQuantizer> observer_;  // calibration only
  std::optional<QuantParams> params_;
};

}  // namespace quark::quantize
