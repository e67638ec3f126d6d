// The decoder layer of the MoE architectures (mixtral, qwen2_moe, qwen3_moe): the Llama-family attention (q/k/v bias
// for qwen2_moe, per-head q_norm/k_norm for qwen3_moe, Mixtral's optional sliding window) and a MoeBlock in place of
// the MLP. Children carry HF's names (moe_layout.h); every expert's linears are slots of the layer, so the quantizer
// replaces them by name like any other linear.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/attention.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/moe_block.h"
#include "core/runtime/moe_split_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

class MoeDecoderLayer : public DecoderLayer, public StandardMoeSplit<MoeDecoderLayer> {
 public:
  /// Loads layer `index` from `weights` as `dtype`; errors name the missing or mis-shaped tensor.
  static absl::StatusOr<std::shared_ptr<MoeDecoderLayer>> Load(const checkpoint::ModelConfig& config, int64_t index,
                                                               const WeightSource& weights, at::ScalarType dtype);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override {
    return SplitForward(hidden, context);
  }
  at::Tensor FeedForward(const at::Tensor& input) override { return moe->forward(input); }
  void BeginCalibration(int64_t min_expert_tokens) override { moe->BeginCoverage(min_expert_tokens); }
  std::vector<ExpertCoverage> FinishCalibration() override;

  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<MoeBlock> moe;

 private:
  MoeDecoderLayer(int64_t index, std::string prefix) : DecoderLayer(index, std::move(prefix)) {}
  std::string block_name_;                 // full: "model.layers.3.block_sparse_moe"
  std::vector<std::string> expert_names_;  // full names, by index
};

}  // namespace quark::runtime
