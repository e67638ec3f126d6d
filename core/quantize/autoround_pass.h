// AutoRound (#35 item 2) as the rounding step of each streamed layer: the `autoround` algo_config entry turned into
// algorithms::AutoRoundQuantizeLayer over every quantized linear of the layer, run on the layer's calibration inputs
// before its QuantLinears are installed with AutoRound's weight parameters (GptqPass's place in the pipeline; the
// layer checkpoint records the rounded weights and parameters as it does GPTQ's, so a run resumes per layer).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/autoround.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/transformer_model.h"

namespace quark::quantize {

struct AutoRoundLayerOutput {
  CalibratedParams params;  // weight parameters by module name (for LayerQuantizer::Calibrate's `known`)
  std::string summary;      // "autoround model.layers.0.: 7 linears, loss 1.2e-3 (iter 0) -> 8.1e-4 (iter 143), ..."
};

class AutoRoundPass {
 public:
  /// `path` names the entry in errors ("algo_config[1]"). INVALID_ARGUMENT naming `path.field` for options out of
  /// range or a model_decoder_layers that is not the model's; naming the module for a linear whose weight spec
  /// AutoRound cannot round (layer_quant_config may give a module another spec than the global one).
  static absl::StatusOr<std::unique_ptr<AutoRoundPass>> Create(const AutoRoundAlgo& algo, const LayerPlan& plan,
                                                               const checkpoint::ModelConfig& model, std::string path);

  /// AutoRound over `layer`'s quantized linears: their FloatLinears hold the rounded weights afterwards.
  /// `samples` are the layer's inputs.
  absl::StatusOr<AutoRoundLayerOutput> Run(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples,
                                           runtime::TransformerModel& model,
                                           const algorithms::AutoRoundCallbacks& callbacks) const;

 private:
  AutoRoundPass() = default;
  absl::StatusOr<std::vector<algorithms::AutoRoundTarget>> TargetsOf(const runtime::DecoderLayer& layer) const;

  algorithms::AutoRoundOptions options_;
  LayerPlan plan_;
  std::string path_;
};

}  // namespace quark::quantize
