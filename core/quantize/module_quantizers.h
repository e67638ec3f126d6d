// The quantizers of one module (weight / bias / input / output, from its resolved LayerQuantConfig) and its two
// phases, shared by QuantLinear and the quantized torch::nn modules (QuantConv2d, QuantEmbedding, ...):
//   calibrating: the module computes in float while its static activation observers see every batch;
//   frozen (after Freeze()): the weight and bias are fake-quantized once, activations on every call.
// Not thread-safe (a module calibrates on one thread).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/real_quant.h"
#include "core/numerics/tensor_quantizer.h"
#include "core/quantize/activation_quantizer.h"

namespace quark::quantize {

struct ModuleQuantizersOptions {
  std::string name;         // full module name, for messages
  LayerQuantConfig config;  // resolved for this module
  at::Tensor weight;        // float weight in the module's layout (may be a read-only view)
  at::Tensor bias;          // float bias or undefined
  /// The weight already holds quantized values (dequantized from an export): no weight or bias quantizer.
  bool weight_prequantized = false;
  /// Known weight parameters (GPTQ's, whose weight already lies on their grid): the weight is not observed.
  std::optional<QuantParams> weight_params;
  /// Known static parameters (reload, or re-applying a calibration): that activation needs no calibration.
  std::optional<QuantParams> input_params;
  std::optional<QuantParams> output_params;
  /// False for Embedding / EmbeddingBag: their input is indices, and Quark's QuantEmbedding(Bag) applies its weight
  /// quantizer only (its forward never calls the input or output quantizer). Their input_tensors / output_tensors
  /// specs are ignored the same way and listed in ignored_fields().
  bool quantize_activations = true;
};

class ModuleQuantizers {
 public:
  /// INVALID_ARGUMENT "<name>.<field>: ..." for a spec the numerics cannot run or that does not fit the weight / bias
  /// shape (a group size that does not divide the grouped axis, a ch_axis out of range).
  static absl::StatusOr<std::unique_ptr<ModuleQuantizers>> Create(ModuleQuantizersOptions options);

  /// Calibrating: observes x (static input spec) and returns it. Frozen: x fake-quantized. Without an input spec: x.
  /// Throws std::runtime_error "<name>.input_tensors: ..." on a quantization error (forward() cannot return a Status;
  /// ModelQuantizer and the LayerStreamer turn it back into one).
  at::Tensor Input(const at::Tensor& x);
  /// The same for the module's output y.
  at::Tensor Output(const at::Tensor& y);
  /// The weight / bias the forward uses (fake-quantized once frozen), in `dtype`; the bias may be undefined.
  at::Tensor Weight(at::ScalarType dtype) const;
  at::Tensor Bias(at::ScalarType dtype) const;
  at::Tensor weight() const { return frozen_ ? qweight_ : weight_; }
  at::Tensor bias() const { return frozen_ ? qbias_ : bias_; }

  /// Observes the weight and bias, freezes every static quantizer and computes the fake-quantized weight and bias.
  /// FAILED_PRECONDITION "<name>.input_tensors: ..." when a static activation saw no calibration batch.
  absl::Status Freeze();
  bool frozen() const { return frozen_; }
  /// True while a static activation still waits for calibration batches.
  bool NeedsCalibration() const;

  /// Real-quantized weight codes (unpacked), scale and zero point: Dequantize of them equals the frozen weight()
  /// but where the export's rounding after the zero point lands elsewhere (ties; export_agreement.h counts them).
  /// FAILED_PRECONDITION before Freeze, without a weight spec, or after ReleaseFloatWeight.
  absl::StatusOr<RealQuantized> ExportWeight() const;
  /// Drops the float weight and bias once frozen (the fake-quantized ones stay for the forward).
  void ReleaseFloatWeight();
  /// #32 item 5, a routed expert streamed in groups: drops every weight and bias tensor (float and fake-quantized),
  /// keeping the quantizers and their parameters; RestoreWeights takes the float ones again (when none is held) and,
  /// once frozen, fake-quantizes them with the frozen parameters: the same tensors as before the drop.
  void DropWeights();
  absl::Status RestoreWeights(at::Tensor weight, at::Tensor bias);
  bool holds_weights() const { return weight_.defined(); }

  const std::string& name() const { return name_; }
  const LayerQuantConfig& config() const { return config_; }
  /// The weight quantizer (nullptr without a weight spec); its spec is the one the numerics run (scale_dtype.h).
  const TensorQuantizer* weight_quantizer() const { return weight_quantizer_.get(); }
  ActivationQuantizer* input_quantizer() const { return input_.get(); }
  ActivationQuantizer* output_quantizer() const { return output_.get(); }
  /// Config fields this module does not apply, e.g. "input_tensors" of an Embedding.
  const std::vector<std::string>& ignored_fields() const { return ignored_fields_; }

 private:
  ModuleQuantizers() = default;
  absl::Status FreezeTensor(TensorQuantizer* quantizer, const at::Tensor& x, const char* field, at::Tensor& out);
  // qweight_ / qbias_ from weight_ / bias_ (observing and freezing a weight quantizer that has no parameters yet).
  absl::Status FakeQuantizeWeights();
  at::Tensor Activation(ActivationQuantizer* quantizer, const at::Tensor& x, const char* field);

  std::string name_;
  LayerQuantConfig config_;
  at::Tensor weight_, bias_;    // float, as given
  at::Tensor qweight_, qbias_;  // fake-quantized (frozen)
  bool frozen_ = false;
  std::unique_ptr<TensorQuantizer> weight_quantizer_;
  std::unique_ptr<TensorQuantizer> bias_quantizer_;
  std::unique_ptr<ActivationQuantizer> input_;
  std::unique_ptr<ActivationQuantizer> output_;
  std::vector<std::string> ignored_fields_;
};

}  // namespace quark::quantize
