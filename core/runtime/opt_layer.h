// The OPT decoder layer: LayerNorm (pre- or post-), attention with biases and learned positions (added at
// the embeddings), ReLU MLP. Children carry HF's names: self_attn.{q,k,v,out}_proj, self_attn_layer_norm,
// fc1, fc2, final_layer_norm.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/attention.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

class OptAttention : public torch::nn::Module {
 public:
  std::shared_ptr<LinearLike> q_proj, k_proj, v_proj, out_proj;
  int64_t heads = 0, head_dim = 0;
  at::Tensor forward(const at::Tensor& x, const LayerContext& context);
};

class OptDecoderLayer : public DecoderLayer {
 public:
  static absl::StatusOr<std::shared_ptr<OptDecoderLayer>> Load(const checkpoint::ModelConfig& config, int64_t index,
                                                               const WeightSource& weights, at::ScalarType dtype);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override;

  std::shared_ptr<OptAttention> self_attn;
  std::shared_ptr<LayerNorm> self_attn_layer_norm, final_layer_norm;
  std::shared_ptr<LinearLike> fc1, fc2;

 private:
  OptDecoderLayer(int64_t index, std::string prefix) : DecoderLayer(index, std::move(prefix)) {}
  bool norm_before_ = true;
};

/// Loads the LayerNorm `name` (".weight"/".bias" of [dim]; none when not elementwise-affine).
absl::StatusOr<std::shared_ptr<LayerNorm>> LoadLayerNorm(const checkpoint::ModelConfig& config, const WeightSource& weights,
                                                         const std::string& name, at::ScalarType dtype);

}  // namespace quark::runtime
