// One quantized tensor of a layer: its spec, role, observer and (once frozen) parameters. The quantizer of a layer
// holds one per weight / input / output. Not thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/observer.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/real_quant.h"
#include "core/numerics/tensor_role.h"

namespace quark {

class TensorQuantizer {
 public:
  /// INVALID_ARGUMENT for a spec the numerics cannot run (the message names the field).
  static absl::StatusOr<std::unique_ptr<TensorQuantizer>> Create(const QuantSpec& spec, TensorRole role);

  /// Static specs: adds a calibration batch (error after Freeze). Dynamic specs and casts: a no-op.
  absl::Status Observe(const at::Tensor& x);

  /// Static specs: fixes the parameters from what was observed (FAILED_PRECONDITION if nothing was).
  /// Dynamic specs and casts: a no-op.
  absl::Status Freeze();

  /// Fixes parameters computed elsewhere (GPTQ's group parameters): FakeQuantize and Export use them from now on,
  /// for dynamic and MX specs too. The caller checks their shape (FakeQuantize names a mismatch).
  void SetParams(QuantParams params) { params_ = std::move(params); }

  /// Static specs: with the frozen parameters (FAILED_PRECONDITION before Freeze); dynamic: computed from x.
  absl::StatusOr<at::Tensor> FakeQuantize(const at::Tensor& x) const;

  /// Codes, scale and zero point of x for export (static: the frozen parameters; MX: computed from x).
  absl::StatusOr<RealQuantized> Export(const at::Tensor& x) const;

  const QuantSpec& spec() const { return spec_; }
  TensorRole role() const { return role_; }
  bool frozen() const { return params_.has_value(); }
  /// The frozen parameters, or nullptr.
  const QuantParams* params() const { return params_ ? &*params_ : nullptr; }
  /// Static and not a cast: needs calibration before FakeQuantize.
  bool NeedsCalibration() const { return observer_ != nullptr; }

 private:
  TensorQuantizer(const QuantSpec& spec, TensorRole role) : spec_(spec), role_(role) {}

  QuantSpec spec_;
  TensorRole role_;
  std::unique_ptr<Observer> observer_;
  /// #30 W4A8: the int4 stage's observer of the fp8 values (observer_ then watches the fp8 per-tensor stage).
  std::unique_ptr<Observer> second_observer_;
  std::optional<QuantParams> params_;
};

}  // namespace quark
