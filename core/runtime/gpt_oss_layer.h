// The gpt-oss decoder layer (HF's GptOssDecoderLayer): RMSNorm, attention with sinks (gpt_oss_attention.h), RMSNorm,
// then the MoE of every layer: a MoeBlock with gpt-oss's routing (GptOssRouting) over experts that each apply the
// fused gate_up linear, the clamped SwiGLU on its interleaved columns, and down (GptOssExpert). Every linear is a slot
// of the layer (checkpoint::GptOssLayerLinears' order and names), so the quantizer replaces them by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/runtime/attention.h"
#include "core/runtime/gpt_oss_attention.h"
#include "core/runtime/moe_block.h"
#include "core/runtime/moe_split_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// HF's GptOssTopKRouter: logits = x @ router^T + bias [N, E] (in x's dtype), top-k of the logits, softmax over those
/// k values (in that dtype). Routing::scores is the logits (float32), what the coverage top-up ranks by.
MoeBlock::RoutingFunction GptOssRouting(int64_t top_k, at::Tensor router_bias);

/// One gpt-oss expert (HF's GptOssExperts for one index): gate_up = gate_up_proj(x) [N, 2 I]; gate = its even
/// columns, up = its odd columns; gate = min(gate, limit), up = clamp(up, -limit, limit);
/// down_proj((up + 1) * gate * sigmoid(alpha * gate)).
class GptOssExpert : public MoeExpert {
 public:
  GptOssExpert(double alpha, double limit) : alpha_(alpha), limit_(limit) {}
  std::shared_ptr<LinearLike> gate_up_proj, down_proj;
  at::Tensor forward(const at::Tensor& x) override;

 private:
  double alpha_, limit_;
};

class GptOssDecoderLayer : public DecoderLayer, public StandardMoeSplit<GptOssDecoderLayer> {
 public:
  /// Loads decoder layer `index` from `weights` as `dtype` (the fused expert tensors split into each expert's
  /// linears, or the experts stored per expert as an HF-quark export holds them); errors name the missing or
  /// mis-shaped tensor and both shapes.
  static absl::StatusOr<std::shared_ptr<GptOssDecoderLayer>> Load(const checkpoint::GptOssConfig& config, int64_t index,
                                                                  const WeightSource& weights, at::ScalarType dtype);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override {
    return SplitForward(hidden, context);
  }
  at::Tensor FeedForward(const at::Tensor& input) override { return moe->forward(input); }
  void BeginCalibration(int64_t min_expert_tokens) override { moe->BeginCoverage(min_expert_tokens); }
  std::vector<ExpertCoverage> FinishCalibration() override;

  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<GptOssAttention> self_attn;
  std::shared_ptr<MoeBlock> moe;  // "mlp" in HF's names

 private:
  GptOssDecoderLayer(int64_t index, std::string prefix) : DecoderLayer(index, std::move(prefix)) {}
  absl::Status LoadExperts(const checkpoint::GptOssConfig& config, const WeightSource& weights, at::ScalarType dtype);
  // Each expert's gate_up_proj then down_proj, by expert: the per-expert tensors where `weights` serves them (an
  // HF-quark export, Mxfp4ExpertSource), else slices of the fused tensors (HF's layout).
  absl::StatusOr<std::vector<std::shared_ptr<LinearLike>>> LoadExpertLinears(const checkpoint::GptOssConfig& config,
                                                                             const WeightSource& weights,
                                                                             at::ScalarType dtype) const;
  std::vector<std::string> expert_names_;  // full names, by index
};

}  // namespace quark::runtime
