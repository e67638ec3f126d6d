#include "core/runtime/opt_layer.h"

#include <cmath>

#include "core/base/status_macros.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {

at::Tensor OptAttention::forward(const at::Tensor& x, const LayerContext& context) {
  const int64_t batch = x.size(0), seq = x.size(1);
  // HF scales q after q_proj; the same product as scaling the scores.
  const at::Tensor q = q_proj->forward(x).view({batch, seq, heads, head_dim}).transpose(1, 2).contiguous();
  const at::Tensor k = k_proj->forward(x).view({batch, seq, heads, head_dim}).transpose(1, 2).contiguous();
  const at::Tensor v = v_proj->forward(x).view({batch, seq, heads, head_dim}).transpose(1, 2).contiguous();
  return out_proj->forward(CausalAttention(q, k, v, context.mask, 1.0 / std::sqrt(head_dim)));
}

at::Tensor OptDecoderLayer::forward(const at::Tensor& hidden, const LayerContext& context) {
  at::Tensor h = hidden + self_attn->forward(norm_before_ ? self_attn_layer_norm->forward(hidden) : hidden, context);
  if (!norm_before_) h = self_attn_layer_norm->forward(h);
  at::Tensor out = h + fc2->forward(at::relu(fc1->forward(norm_before_ ? final_layer_norm->forward(h) : h)));
  return norm_before_ ? out : final_layer_norm->forward(out);
}

absl::StatusOr<std::shared_ptr<LayerNorm>> LoadLayerNorm(const checkpoint::ModelConfig& config, const WeightSource& weights,
                                                         const std::string& name, at::ScalarType dtype) {
  at::Tensor weight, bias;
  if (config.layer_norm_elementwise_affine) {
    auto w = LoadChecked(weights, name + ".weight", {config.hidden_size}, dtype);
    if (!w.ok()) return w.status();
    auto b = LoadChecked(weights, name + ".bias", {config.hidden_size}, dtype);
    if (!b.ok()) return b.status();
    weight = *w;
    bias = *b;
  }
  return std::make_shared<LayerNorm>(weight, bias, config.layer_norm_eps);
}

absl::StatusOr<std::shared_ptr<OptDecoderLayer>> OptDecoderLayer::Load(const checkpoint::ModelConfig& config, int64_t index,
                                                                       const WeightSource& weights, at::ScalarType dtype) {
  const std::string prefix = checkpoint::LayerPrefix(config, index);
  std::shared_ptr<OptDecoderLayer> layer(new OptDecoderLayer(index, prefix));
  layer->norm_before_ = config.do_layer_norm_before;
  auto attn = std::make_shared<OptAttention>();
  attn->heads = config.num_attention_heads;
  attn->head_dim = config.head_dim;
  // fc1 and fc2 are the layer's own children (HF's OPTDecoderLayer has no mlp module).
  const std::vector<LinearSlot> slots = {{attn.get(), &attn->q_proj}, {attn.get(), &attn->k_proj},
                                         {attn.get(), &attn->v_proj}, {attn.get(), &attn->out_proj},
                                         {layer.get(), &layer->fc1},  {layer.get(), &layer->fc2}};
  const auto specs = checkpoint::LayerLinears(config);
  QUARK_RETURN_IF_ERROR(LoadLinears(weights, prefix, specs, slots, dtype));
  auto attn_norm = LoadLayerNorm(config, weights, prefix + "self_attn_layer_norm", dtype);
  if (!attn_norm.ok()) return attn_norm.status();
  auto final_norm = LoadLayerNorm(config, weights, prefix + "final_layer_norm", dtype);
  if (!final_norm.ok()) return final_norm.status();
  layer->self_attn = layer->register_module("self_attn", attn);
  layer->self_attn_layer_norm = layer->register_module("self_attn_layer_norm", *attn_norm);
  layer->final_layer_norm = layer->register_module("final_layer_norm", *final_norm);
  layer->AddLinears(specs, slots);
  return layer;
}

}  // namespace quark::runtime
