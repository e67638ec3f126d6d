// A quantized Linear for the runtime's decoder layers: weight / bias / input / output quantizers from the module's
// resolved LayerQuantConfig. Two phases:
//   calibrating: forward is the float linear while the static input/output observers see every batch;
//   frozen (after Freeze()): forward is fake-quantized (input -> quantized weight and bias -> output).
// A frozen QuantLinear also gives the real-quantized codes of its weight for export. The quantizers and both phases
// live in ModuleQuantizers, shared with the quantized torch::nn modules of ModelQuantizer.
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
#include "core/quantize/module_quantizers.h"
#include "core/runtime/expert_streaming.h"
#include "core/runtime/linear.h"
#include "core/runtime/matmul_precision.h"

namespace quark::quantize {

struct QuantLinearOptions {
  std::string name;        // full HF module name, for messages
  LayerQuantConfig config;  // resolved for this module (may carry the KV-cache output spec)
  at::Tensor weight;       // [out, in] float (may be a read-only view)
  at::Tensor bias;         // [out] or undefined
  /// The weight already holds quantized values (dequantized from an export): no weight quantizer is applied.
  bool weight_prequantized = false;
  /// Known weight parameters (GPTQ): the weight already lies on their grid and is not observed.
  std::optional<QuantParams> weight_params;
  /// Known static parameters (reload, or re-applying a calibration): the activation needs no calibration.
  std::optional<QuantParams> input_params;
  std::optional<QuantParams> output_params;
};

class QuantLinear : public runtime::LinearLike, public runtime::StreamableLinear {
 public:
  /// INVALID_ARGUMENT naming the module and field for a weight/bias shape or spec the numerics cannot run.
  static absl::StatusOr<std::shared_ptr<QuantLinear>> Create(QuantLinearOptions options);
  /// Create, for the linear `replaced` of a layer: when it is a routed expert streamed in groups (StreamedLinear),
  /// the quantized linear streams with it: it holds its weights only while the expert is resident and, on every
  /// later load, fake-quantizes them again with its frozen parameters (expert_streaming.h).
  static absl::StatusOr<std::shared_ptr<QuantLinear>> CreateFor(QuantLinearOptions options,
                                                                const std::shared_ptr<runtime::LinearLike>& replaced);

  /// [..., in] -> [..., out]. Calibrating: float result, static observers updated. Frozen: fake-quantized.
  /// Throws std::runtime_error naming the module on a quantization error (the LayerStreamer turns it into a Status).
  at::Tensor forward(const at::Tensor& input) override;
  int64_t in_features() const override { return in_features_; }
  int64_t out_features() const override { return out_features_; }
  /// The weight the forward uses: fake-quantized once frozen.
  at::Tensor weight() const override {
    Resident();
    return q_->weight();
  }
  at::Tensor bias() const override {
    Resident();
    return q_->bias();
  }

  /// Observes the weight and bias, freezes every static quantizer and computes the fake-quantized weight.
  /// FAILED_PRECONDITION naming the module when a static activation saw no calibration batch.
  absl::Status Freeze();
  bool frozen() const { return q_->frozen(); }

  /// Real-quantized weight codes (unpacked) for export; FAILED_PRECONDITION before Freeze or without a weight spec.
  absl::StatusOr<RealQuantized> ExportWeight() const;
  /// Drops the float weight once exported (the fake-quantized weight stays for the forward). A streamed linear
  /// keeps both while its expert is resident: the residency bounds them.
  void ReleaseFloatWeight() {
    if (!streamed_) q_->ReleaseFloatWeight();
  }

  /// StreamableLinear (a streamed routed expert only): loads the float linear's weights and fake-quantizes them,
  /// or drops them.
  void MaterializeWeights() override;
  void ReleaseWeights() override;
  bool streamed() const { return streamed_ != nullptr; }

  const std::string& name() const { return q_->name(); }
  const LayerQuantConfig& config() const { return q_->config(); }
  ActivationQuantizer* input_quantizer() const { return q_->input_quantizer(); }
  ActivationQuantizer* output_quantizer() const { return q_->output_quantizer(); }
  ModuleQuantizers& quantizers() { return *q_; }
  const ModuleQuantizers& quantizers() const { return *q_; }

  /// "QuantLinear(<name>, in_features=.., out_features=..)".
  void pretty_print(std::ostream& stream) const override;

 private:
  QuantLinear() = default;
  // Acquires the streamed expert (loading this linear's weights when it is not resident); nothing otherwise.
  void Resident() const;

  std::unique_ptr<ModuleQuantizers> q_;
  int64_t in_features_ = 0, out_features_ = 0;
  // float32 copies of the weight and bias for bfloat16 inputs on CPUs whose bf16 GEMM is a slow fallback
  // (runtime/matmul_precision.h), made once per phase: the float weight while calibrating, the fake-quantized one
  // once frozen. One layer's worth, released with the layer.
  runtime::Float32Operands float32_;
  bool float32_frozen_ = false;
  // The routed expert's float linear this one streams with; null for every other linear.
  std::shared_ptr<runtime::StreamedLinear> streamed_;
};

}  // namespace quark::quantize
