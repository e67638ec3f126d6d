// The Llama 4 text decoder layer (HF's Llama4TextDecoderLayer): RMSNorm, Llama4Attention, RMSNorm, then a SwiGLU MLP
// (dense layers) or the MoE (moe_layers): a MoeBlock whose router picks the top-k experts by logit and weights each
// with the sigmoid of its logit (Llama4Routing), the weight multiplying the expert's *input* (HF's Llama4TextMoe), plus
// the shared expert added ungated. Children carry HF's names (feed_forward.experts.E.gate_proj, ...) so the quantizer
// replaces linears by name (checkpoint::Llama4LayerLinears' order).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/llama4_config.h"
#include "core/runtime/attention.h"
#include "core/runtime/llama4_attention.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/moe_block.h"
#include "core/runtime/moe_split_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// HF's Llama4Router: logits = x @ router^T in x's dtype; top-k by logit; the weights are sigmoid(logit) of the chosen
/// (in float32, cast to x's dtype). Routing::scores is sigmoid of every logit (float32), what the coverage top-up ranks.
MoeBlock::RoutingFunction Llama4Routing(int64_t top_k);

class Llama4DecoderLayer : public DecoderLayer, public StandardMoeSplit<Llama4DecoderLayer> {
 public:
  /// Loads decoder layer `index` from `weights` as `dtype`; errors name the missing or mis-shaped tensor, and a
  /// checkpoint with HF's fused experts (feed_forward.experts.gate_up_proj) is refused naming that tensor.
  static absl::StatusOr<std::shared_ptr<Llama4DecoderLayer>> Load(const checkpoint::Llama4Config& config, int64_t index,
                                                                  const WeightSource& weights, at::ScalarType dtype);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override {
    return SplitForward(hidden, context);
  }
  at::Tensor FeedForward(const at::Tensor& input) override { return moe ? moe->forward(input) : mlp->forward(input); }
  void BeginCalibration(int64_t min_expert_tokens) override {
    if (moe) moe->BeginCoverage(min_expert_tokens);
  }
  std::vector<ExpertCoverage> FinishCalibration() override;

  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<Llama4Attention> self_attn;
  std::shared_ptr<LlamaMlp> mlp;  // dense layers ("feed_forward")
  std::shared_ptr<MoeBlock> moe;  // MoE layers ("feed_forward")

 private:
  Llama4DecoderLayer(int64_t index, std::string prefix) : DecoderLayer(index, std::move(prefix)) {}
  absl::Status LoadFeedForward(const checkpoint::Llama4Config& config, const WeightSource& weights, at::ScalarType dtype);
  absl::Status LoadLinears(const checkpoint::Llama4Config& config, const WeightSource& weights, at::ScalarType dtype);
  std::vector<std::string> expert_names_;  // full names, by index (MoE layers)
};

}  // namespace quark::runtime
