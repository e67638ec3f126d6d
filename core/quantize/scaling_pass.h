// SmoothQuant, AutoSmoothQuant and AWQ as the first step of each streamed layer's quantization: the Config's
// algo_config entries of those kinds (with Quark's per-architecture scaling_layers filled in when left empty), run
// in algo_config order on the layer's float weights with the float model's hidden states, before GPTQ and
// calibration see the layer. Memory: one layer, plus the float hidden states of the calibration samples.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/smoothing.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/export/gguf_blocks.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/transformer_model.h"

namespace quark::quantize {

/// Quark's scaling_layers template for the model's architecture (Llama family: input_layernorm -> q/k/v inspecting
/// self_attn, v_proj -> o_proj when their shapes match, post_attention_layernorm -> gate/up inspecting mlp,
/// up_proj -> down_proj; OPT: the same with its names and fc1 -> fc2; MoE: post_attention_layernorm -> every
/// expert's gate/up and the routers, inspecting the block, then each expert's up -> down).
std::vector<ScalingLayer> DefaultScalingLayers(const checkpoint::ModelConfig& model);

/// `algo` with scaling_layers and model_decoder_layers filled in from the model where empty; a pair in front of an
/// MoE block gets the routers it leaves out (they take the scale exactly, algorithms/moe_scaling.h).
AlgoConfig ResolveScalingDefaults(AlgoConfig algo, const checkpoint::ModelConfig& model);

/// True for the algorithms this pass runs (smooth, autosmoothquant, awq).
bool IsScalingAlgo(const AlgoConfig& algo);

struct ScalingCallbacks {
  std::function<void(const std::string& step)> on_step;
  std::function<bool()> cancelled;
};

/// What one layer's run changed: every tensor (full HF name) whose values differ from the checkpoint's.
struct ScalingLayerResult {
  std::map<std::string, at::Tensor> tensors;
  std::vector<std::string> summary;  // one line per pair: "awq input_layernorm -> q,k,v ratio 0.45 scales [a, b]"
  /// MoE: what the recording pass over the float layer gave each expert (routed and topped-up tokens); the run's
  /// metrics report it where no later calibration forward does (quantize/expert_coverage.h). Empty for dense layers.
  std::vector<runtime::ExpertCoverage> coverage;
};

class ScalingPass {
 public:
  /// `algos` resolved (ResolveScalingDefaults), with their indices in algo_config for messages. INVALID_ARGUMENT
  /// naming the field for a prev_op / layer / inp / module2inspect that is not the model's, or a model_decoder_layers
  /// that is not its decoder layers.
  static absl::StatusOr<std::unique_ptr<ScalingPass>> Create(const std::vector<std::pair<size_t, AlgoConfig>>& algos,
                                                             const LayerPlan& plan,
                                                             const checkpoint::ModelConfig& model);

  /// Runs the algorithms on `layer` (float linears). `inputs` are the layer's inputs as the streamer computes them:
  /// at layer 0 they are also the float hidden states; later layers use the float outputs this pass kept.
  absl::StatusOr<ScalingLayerResult> Run(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs,
                                         runtime::TransformerModel& model, const ScalingCallbacks& callbacks);

  /// A resumed run's stand-in for Run on a layer it restores from a checkpoint: moves the float hidden states past
  /// `layer` (still with the checkpoint's float weights, before the recorded tensors replace them) with the same
  /// forward as Run's recording pass, so the next layer's algorithms see the same bits.
  absl::Status Advance(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs,
                       runtime::TransformerModel& model);

  /// MoE calibration coverage of the recorded expert inputs (quantize/expert_coverage.h).
  void set_min_expert_tokens(int64_t n) { min_expert_tokens_ = n; }
  /// AWQ's trials evaluated in batches of at most these device bytes (algorithms::AwqOptions::search_batch_bytes).
  void set_search_batch_bytes(int64_t bytes) { search_batch_bytes_ = bytes; }

  /// #37 item 4, before llama.cpp's K-quants (no engine scheme): the GGUF type the file holds each weight in (HF
  /// name -> type, the writer's plan); AWQ then simulates each linear by that type (quantize/gguf_fake_quant.h).
  void set_gguf_types(std::map<std::string, exporter::gguf::GgmlType> types) { gguf_types_ = std::move(types); }

 private:
  ScalingPass() = default;
  algorithms::LayerQuantSpecs SpecsFor(const runtime::DecoderLayer& layer) const;

  std::vector<std::pair<size_t, AlgoConfig>> algos_;
  int64_t min_expert_tokens_ = 32;  // kDefaultMinExpertTokens
  int64_t search_batch_bytes_ = 0;
  LayerPlan plan_;
  checkpoint::ModelConfig model_;
  std::vector<at::Tensor> float_inputs_;  // the float model's hidden states before the next layer
  std::map<std::string, exporter::gguf::GgmlType> gguf_types_;  // empty = the plan's weight specs
};

}  // namespace quark::quantize
