// GPTQ as the first step of each streamed layer's quantization: the Config's `gptq` algo_config entry (with Quark's
// per-architecture defaults filled in) turned into per-layer plans of algorithms::GptqQuantizeLayer, run on the
// layer's calibration inputs before the layer's QuantLinears are installed with GPTQ's weight parameters.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/gptq_layer.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/export/gguf_pre_encoded.h"
#include "core/quantize/expert_weight_spill.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/transformer_model.h"

namespace quark::quantize {

/// `algo` with Quark's defaults for the model's architecture where it leaves them empty: inside_layer_modules
/// (Llama family: k, v, q, o, up, gate, down; OPT: k, v, q, out_proj, fc1, fc2) and model_decoder_layers.
GptqAlgo ResolveGptqDefaults(GptqAlgo algo, const checkpoint::ModelConfig& model);

class GptqPass {
 public:
  /// `algo` resolved (ResolveGptqDefaults); `path` names it in errors ("algo_config[0]"). INVALID_ARGUMENT for an
  /// inside_layer_modules entry that matches no linear of a decoder layer, a model_decoder_layers that is not the
  /// model's, or a quantized module GPTQ cannot run (its weight spec), naming the field.
  static absl::StatusOr<std::unique_ptr<GptqPass>> Create(const GptqAlgo& algo, const LayerPlan& plan,
                                                          const checkpoint::ModelConfig& model, std::string path);
  /// The algorithm it runs: gptq, gptaq or qronos (progress and logs name it).
  const GptqAlgo& algo() const { return algo_; }

  /// GPTQ over `layer`'s modules: their FloatLinears hold the GPTQ'd weights afterwards; returns the weight
  /// parameters by module name (for LayerQuantizer::Calibrate's `known`). `samples` are the layer's inputs.
  /// gptaq / qronos (asymmetric_layer.h) pair `samples` (the quantized model's inputs) with the float model's, which
  /// this pass keeps and moves past each layer (at layer 0 they are `samples`).
  absl::StatusOr<CalibratedParams> Run(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples,
                                       runtime::TransformerModel& model,
                                       const algorithms::GptqLayerCallbacks& callbacks);

  /// A resumed run's stand-in for Run on a layer restored from a checkpoint: gptaq / qronos move the float inputs
  /// past `layer` (its float weights, before the recorded tensors replace them); nothing for gptq.
  absl::Status Advance(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples,
                       runtime::TransformerModel& model);

  /// MoE calibration coverage of the experts' Hessians (expert_coverage.h): tokens each expert sees at least.
  void set_min_expert_tokens(int64_t n) { min_expert_tokens_ = n; }

  /// #37 item 4, K-quant-aware GPTQ for a GGUF of llama.cpp's rules (no scheme): every linear of `inside_layer_modules`
  /// that the GGUF plan in `pre_encoded` types Q4_K, Q5_K or Q6_K is quantized by algorithms::GptqKQuantizeWeight in
  /// that type and its blocks put into `pre_encoded`; the mixture's other types are left to the writer (logged).
  /// `with_imatrix`: ggml's search weighted by the Hessian diagonal (mean x² over the calibration tokens, what
  /// llama-imatrix accumulates), as llama-quantize weights it by an importance matrix. gptq only (not gptaq/qronos).
  void UseKQuantTargets(std::shared_ptr<exporter::gguf::PreEncodedTensors> pre_encoded, bool with_imatrix);
  bool kquant() const { return pre_encoded_ != nullptr; }

  /// #32 item 5, routed experts streamed in groups: their GPTQ weights go to `spill`, which the streamer's
  /// ExpertStreamingWeights reads in place of the checkpoint's.
  void set_expert_spill(std::shared_ptr<ExpertWeightSpill> spill) { expert_spill_ = std::move(spill); }
  /// The last Run's K-quant results by tensor name ("model.layers.0.mlp.down_proj.weight"), float32: what their
  /// blocks decode to. Handed over (the next call returns only newer ones).
  std::map<std::string, at::Tensor> TakeKQuantWeights() { return std::move(kquant_weights_); }

 private:
  GptqPass() = default;
  absl::StatusOr<algorithms::GptqLayerPlan> PlanFor(const runtime::DecoderLayer& layer);
  // K-quant mode: the target of `linear` (full name `name`), or nullopt (logged) when its GGUF type is not a K-quant
  // GPTQ runs.
  std::optional<algorithms::GptqTarget> KQuantTarget(const std::string& name, const std::string& relative_name);

  GptqAlgo algo_;
  LayerPlan plan_;
  checkpoint::ModelConfig model_;
  std::string path_;
  int64_t min_expert_tokens_ = kDefaultMinExpertTokens;
  std::vector<at::Tensor> float_inputs_;  // gptaq / qronos: the float model's inputs of the next layer
  std::shared_ptr<exporter::gguf::PreEncodedTensors> pre_encoded_;  // K-quant mode only
  bool kquant_imatrix_ = false;
  std::map<std::string, at::Tensor> kquant_weights_;
  std::shared_ptr<ExpertWeightSpill> expert_spill_;
};

}  // namespace quark::quantize
