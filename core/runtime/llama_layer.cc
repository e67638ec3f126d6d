#include "core/runtime/llama_layer.h"

#include <cmath>

#include "core/base/status_macros.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {

at::Tensor LlamaAttention::forward(const at::Tensor& x, const LayerContext& context) {
  const int64_t batch = x.size(0), seq = x.size(1);
  // [B, T, H*D] -> [B, H, T, D]
  at::Tensor q = q_proj->forward(x).view({batch, seq, heads, head_dim});
  at::Tensor k = k_proj->forward(x).view({batch, seq, kv_heads, head_dim});
  if (q_norm) q = q_norm->forward(q);  // over head_dim, per head (Qwen3)
  if (k_norm) k = k_norm->forward(k);
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  at::Tensor v = v_proj->forward(x).view({batch, seq, kv_heads, head_dim}).transpose(1, 2).contiguous();
  q = ApplyRope(q, context.cos, context.sin);
  k = ApplyRope(k, context.cos, context.sin);
  if (key_cache_quantizer) k = key_cache_quantizer(k);
  TORCH_CHECK(window == 0 || (context.sliding_window == window && context.sliding_mask.defined()), "layer window ",
              window, " but the context was built for window ", context.sliding_window);
  const at::Tensor& mask = window > 0 ? context.sliding_mask : context.mask;
  const at::Tensor attended = CausalAttention(q.contiguous(), k.contiguous(), v, mask, 1.0 / std::sqrt(head_dim));
  return o_proj->forward(attended);
}

at::Tensor LlamaMlp::forward(const at::Tensor& x) {
  // gate, then up, then down, in that order (not left to the compiler's argument order): a recording pass that
  // stops after the last input it needs (algorithms::RecordLinearInputs) then skips every later product.
  const at::Tensor gate = at::silu(gate_proj->forward(x));
  const at::Tensor up = up_proj->forward(x);
  return down_proj->forward(gate * up);
}

at::Tensor LlamaDecoderLayer::forward(const at::Tensor& hidden, const LayerContext& context) {
  at::Tensor h = hidden + self_attn->forward(input_layernorm->forward(hidden), context);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

absl::StatusOr<std::shared_ptr<LlamaAttention>> NewLlamaAttention(const checkpoint::ModelConfig& config, int64_t index,
                                                                  const std::string& prefix, const WeightSource& weights,
                                                                  at::ScalarType dtype) {
  auto attn = std::make_shared<LlamaAttention>();
  attn->heads = config.num_attention_heads;
  attn->kv_heads = config.num_key_value_heads;
  attn->head_dim = config.head_dim;
  attn->window = checkpoint::LayerAttentionWindow(config, index);
  if (config.qk_norm) {
    auto q_norm = LoadChecked(weights, prefix + "self_attn.q_norm.weight", {config.head_dim}, dtype);
    if (!q_norm.ok()) return q_norm.status();
    auto k_norm = LoadChecked(weights, prefix + "self_attn.k_norm.weight", {config.head_dim}, dtype);
    if (!k_norm.ok()) return k_norm.status();
    attn->q_norm = attn->register_module("q_norm", std::make_shared<RmsNorm>(*q_norm, config.rms_norm_eps));
    attn->k_norm = attn->register_module("k_norm", std::make_shared<RmsNorm>(*k_norm, config.rms_norm_eps));
  }
  return attn;
}

absl::StatusOr<PreNorms> LoadPreNorms(const checkpoint::ModelConfig& config, const std::string& prefix,
                                      const WeightSource& weights, at::ScalarType dtype) {
  auto in_norm = LoadChecked(weights, prefix + "input_layernorm.weight", {config.hidden_size}, dtype);
  if (!in_norm.ok()) return in_norm.status();
  auto post_norm = LoadChecked(weights, prefix + "post_attention_layernorm.weight", {config.hidden_size}, dtype);
  if (!post_norm.ok()) return post_norm.status();
  return PreNorms{std::make_shared<RmsNorm>(*in_norm, config.rms_norm_eps),
                  std::make_shared<RmsNorm>(*post_norm, config.rms_norm_eps)};
}

absl::StatusOr<std::shared_ptr<LlamaDecoderLayer>> LlamaDecoderLayer::Load(const checkpoint::ModelConfig& config,
                                                                           int64_t index, const WeightSource& weights,
                                                                           at::ScalarType dtype) {
  const std::string prefix = checkpoint::LayerPrefix(config, index);
  std::shared_ptr<LlamaDecoderLayer> layer(new LlamaDecoderLayer(index, prefix));
  auto created = NewLlamaAttention(config, index, prefix, weights, dtype);
  if (!created.ok()) return created.status();
  std::shared_ptr<LlamaAttention> attn = *std::move(created);
  auto mlp = std::make_shared<LlamaMlp>();
  const std::vector<LinearSlot> slots = {{attn.get(), &attn->q_proj}, {attn.get(), &attn->k_proj},
                                         {attn.get(), &attn->v_proj}, {attn.get(), &attn->o_proj},
                                         {mlp.get(), &mlp->gate_proj}, {mlp.get(), &mlp->up_proj},
                                         {mlp.get(), &mlp->down_proj}};
  const auto specs = checkpoint::LayerLinears(config);
  QUARK_RETURN_IF_ERROR(LoadLinears(weights, prefix, specs, slots, dtype));
  auto norms = LoadPreNorms(config, prefix, weights, dtype);
  if (!norms.ok()) return norms.status();
  layer->input_layernorm = layer->register_module("input_layernorm", norms->input_layernorm);
  layer->self_attn = layer->register_module("self_attn", attn);
  layer->post_attention_layernorm = layer->register_module("post_attention_layernorm", norms->post_attention_layernorm);
  layer->mlp = layer->register_module("mlp", mlp);
  layer->AddLinears(specs, slots);
  return layer;
}

}  // namespace quark::runtime
