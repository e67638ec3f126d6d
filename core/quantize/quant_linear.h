// A quantized Linear for the runtime's decoder layers: weight / bias / input / output quantizers from the module's
// resolved LayerQuantConfig. Two phases:
//   calibrating: forward is the float linear while the static input/output observers see every batch;
//   frozen (after Freeze()): forward is fake-quantized (input -> quantized weight and bias -> output).
// A frozen QuantLinear also gives the real-quantized codes of its weight for export.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/real_quant.h"
#include "core/numerics/tensor_quantizer.h"
#include "core/quantize/activation_quantizer.h"
#include "core/runtime/linear.h"

namespace quark::quantize {

struct QuantLinearOptions {
  std::string name;        // full HF module name, for messages
  LayerQuantConfig config;  // resolved for this module (may carry the KV-cache output spec)
  at::Tensor weight;       // [out, in] float (may be a read-only view)
  at::Tensor bias;         // [out] or undefined
  /// The weight already holds quantized values (dequantized from an export): no weight quantizer is applied.
  bool weight_prequantized = false;
  /// Known static parameters (reload, or re-applying a calibration): the activation needs no calibration.
  std::optional<QuantParams> input_params;
  std::optional<QuantParams> output_params;
};

class QuantLinear : public runtime::LinearLike {
 public:
  /// INVALID_ARGUMENT naming the module and field for a weight/bias shape or spec the numerics cannot run.
  static absl::StatusOr<std::shared_ptr<QuantLinear>> Create(QuantLinearOptions options);

  /// [..., in] -> [..., out]. Calibrating: float result, static observers updated. Frozen: fake-quantized.
  /// Throws std::runtime_error naming the module on a quantization error (the LayerStreamer turns it into a Status).
  at::Tensor forward(const at::Tensor& input) override;
  int64_t in_features() const override { return in_features_; }
  int64_t out_features() const override { return out_features_; }
  /// The weight the forward uses: fake-quantized once frozen.
  at::Tensor weight() const override { return frozen_ ? qweight_ : weight_; }
  at::Tensor bias() const override { return frozen_ ? qbias_ : bias_; }

  /// Observes the weight and bias, freezes every static quantizer and computes the fake-quantized weight.
  /// FAILED_PRECONDITION naming the module when a static activation saw no calibration batch.
  absl::Status Freeze();
  bool frozen() const { return frozen_; }

  /// Real-quantized weight codes (unpacked) for export; FAILED_PRECONDITION before Freeze or without a weight spec.
  absl::StatusOr<RealQuantized> ExportWeight() const;
  /// Drops the float weight once exported (the fake-quantized weight stays for the forward).
  void ReleaseFloatWeight();

  const std::string& name() const { return name_; }
  const LayerQuantConfig& config() const { return config_; }
  ActivationQuantizer* input_quantizer() const { return input_.get(); }
  ActivationQuantizer* output_quantizer() const { return output_.get(); }

 private:
  QuantLinear() = default;
  absl::StatusOr<at::Tensor> QuantizedForward(const at::Tensor& input) const;

  std::string name_;
  LayerQuantConfig config_;
  at::Tensor weight_, bias_;    // float, as given
  at::Tensor qweight_, qbias_;  // fake-quantized (frozen)
  int64_t in_features_ = 0, out_features_ = 0;
  bool frozen_ = false;
  bool weight_prequantized_ = false;
  std::unique_ptr<TensorQuantizer> weight_quantizer_;
  std::unique_ptr<TensorQuantizer> bias_quantizer_;
  std::unique_ptr<ActivationQuantizer> input_;
  std::unique_ptr<ActivationQuantizer> output_;
};

}  // namespace quark::quantize
