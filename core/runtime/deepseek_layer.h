// The DeepSeek-V3 decoder layer (HF's DeepseekV3DecoderLayer): RMSNorm, multi-head latent attention
// (deepseek_attention.h), RMSNorm, then a SwiGLU MLP in layers [0, first_k_dense_replace) and the MoE in the others.
// The MoE is a MoeBlock with DeepSeek's routing (DeepseekRouting) and its shared experts added ungated; every linear is
// a slot of the layer (checkpoint::DeepseekLayerLinears' order and names), so the quantizer replaces them by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/runtime/deepseek_attention.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/moe_block.h"
#include "core/runtime/moe_split_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// HF's DeepseekV3TopkRouter: scores = sigmoid(x @ router^T) in float32 (float64 when x is); the choice adds
/// e_score_correction_bias [E] (float32); groups (n_group of E / n_group experts) are ranked by the sum of their two
/// best choices, the best topk_group kept (the others' choices set to 0, as HF's masked_fill); top-k of the choices;
/// the weights are the selected experts' *scores* (without the bias), renormalized when norm_topk_prob (+1e-20), times
/// routed_scaling_factor. Routing::scores is the choice before the group mask (what the coverage top-up ranks by).
MoeBlock::RoutingFunction DeepseekRouting(const checkpoint::DeepseekConfig& config, at::Tensor correction_bias);

class DeepseekDecoderLayer : public DecoderLayer, public StandardMoeSplit<DeepseekDecoderLayer> {
 public:
  /// Loads decoder layer `index` (< num_hidden_layers) from `weights` as `dtype`; errors name the missing or
  /// mis-shaped tensor.
  static absl::StatusOr<std::shared_ptr<DeepseekDecoderLayer>> Load(const checkpoint::DeepseekConfig& config,
                                                                    int64_t index, const WeightSource& weights,
                                                                    at::ScalarType dtype);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override {
    return SplitForward(hidden, context);
  }
  at::Tensor FeedForward(const at::Tensor& input) override { return moe ? moe->forward(input) : mlp->forward(input); }
  void BeginCalibration(int64_t min_expert_tokens) override {
    if (moe) moe->BeginCoverage(min_expert_tokens);
  }
  std::vector<ExpertCoverage> FinishCalibration() override;

  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<DeepseekAttention> self_attn;
  std::shared_ptr<LlamaMlp> mlp;  // dense layers
  std::shared_ptr<MoeBlock> moe;  // MoE layers ("mlp" in HF's names)

 private:
  DeepseekDecoderLayer(int64_t index, std::string prefix) : DecoderLayer(index, std::move(prefix)) {}
  absl::Status LoadAttention(const checkpoint::DeepseekConfig& config, const WeightSource& weights, at::ScalarType dtype);
  absl::Status LoadMlp(const checkpoint::DeepseekConfig& config, const WeightSource& weights, at::ScalarType dtype);
  std::vector<std::string> expert_names_;  // full names, by index (MoE layers)
};

}  // namespace quark::runtime
