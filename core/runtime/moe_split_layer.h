// The decoder layers with a routed (MoE) block (mixtral/qwen MoE, Llama 4, DeepSeek-V3, gpt-oss) all compute
// `h = hidden + attention(norm(hidden))`, then `h + feed_forward(norm'(h))`. Exposing the two halves lets a pass run
// every sample's attention first and then the routed block on all samples at once (ForwardLayerSamples,
// layer_forward.h), so that experts streamed in groups are each loaded once per pass instead of once per sample.
#pragma once

#include <ATen/ATen.h>

#include "core/runtime/decoder_layer.h"
#include "core/runtime/moe_block.h"

namespace quark::runtime {

class MoeSplitLayer {
 public:
  virtual ~MoeSplitLayer() = default;
  /// The routed block; null in a dense layer of a family that mixes both (Llama 4, DeepSeek-V3).
  virtual MoeBlock* routed_block() = 0;
  /// hidden + the attention's output ([B, T, hidden]): the residual the feed-forward adds to.
  virtual at::Tensor Attend(const at::Tensor& hidden, const LayerContext& context) = 0;
  /// The feed-forward's input: the post-attention norm of Attend's result.
  virtual at::Tensor FeedForwardInput(const at::Tensor& attended) = 0;
  /// The feed-forward's output for FeedForwardInput's result: the routed block's, or the dense MLP's.
  virtual at::Tensor FeedForward(const at::Tensor& input) = 0;

  /// The layer's forward, from the parts (every implementation's forward is this, so the split path is bit for bit
  /// the same computation).
  at::Tensor SplitForward(const at::Tensor& hidden, const LayerContext& context) {
    const at::Tensor h = Attend(hidden, context);
    return h + FeedForward(FeedForwardInput(h));
  }
};

/// The split as the four families compute it, from `Layer`'s public members input_layernorm, self_attn,
/// post_attention_layernorm and moe (null in a dense layer); Layer adds FeedForward (the dense MLP where it has one).
template <class Layer>
class StandardMoeSplit : public MoeSplitLayer {
 public:
  MoeBlock* routed_block() override { return layer().moe.get(); }
  at::Tensor Attend(const at::Tensor& hidden, const LayerContext& context) override {
    return hidden + layer().self_attn->forward(layer().input_layernorm->forward(hidden), context);
  }
  at::Tensor FeedForwardInput(const at::Tensor& attended) override {
    return layer().post_attention_layernorm->forward(attended);
  }

 private:
  Layer& layer() { return static_cast<Layer&>(*this); }
};

}  // namespace quark::runtime
