#include "core/runtime/gemma_layer.h"

#include <cmath>

#include "core/base/status_macros.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {
namespace {

absl::StatusOr<std::shared_ptr<RmsNorm>> LoadGemmaNorm(const WeightSource& weights, const std::string& name,
                                                        int64_t dim, double eps, at::ScalarType dtype) {
  auto weight = LoadChecked(weights, name + ".weight", {dim}, dtype);
  if (!weight.ok()) return weight.status();
  return std::make_shared<RmsNorm>(*weight, eps, /*unit_offset=*/true);
}

}  // namespace

at::Tensor GemmaAttention::forward(const at::Tensor& x, const LayerContext& context) {
  const int64_t batch = x.size(0), seq = x.size(1);
  // [B, T, H*D] -> [B, H, T, D]
  at::Tensor q = q_proj->forward(x).view({batch, seq, heads, head_dim}).transpose(1, 2);
  at::Tensor k = k_proj->forward(x).view({batch, seq, kv_heads, head_dim}).transpose(1, 2);
  at::Tensor v = v_proj->forward(x).view({batch, seq, kv_heads, head_dim}).transpose(1, 2).contiguous();
  // Gemma3Attention: q_norm / k_norm over each head's head_dim, before RoPE.
  if (q_norm) q = q_norm->forward(q);
  if (k_norm) k = k_norm->forward(k);
  // Sliding layers of Gemma 3 rotate with the local base (Gemma3TextModel.rotary_emb_local).
  const bool local = window > 0 && context.local_cos.defined();
  const at::Tensor& cos = local ? context.local_cos : context.cos;
  const at::Tensor& sin = local ? context.local_sin : context.sin;
  q = ApplyRope(q, cos, sin);
  k = ApplyRope(k, cos, sin);
  TORCH_CHECK(window == 0 || (context.sliding_window == window && context.sliding_mask.defined()), "layer window ",
              window, " but the context was built for window ", context.sliding_window);
  const at::Tensor& mask = window > 0 ? context.sliding_mask : context.mask;
  const at::Tensor attended = CausalAttention(q.contiguous(), k.contiguous(), v, mask, scale, softcap);
  return o_proj->forward(attended);
}

at::Tensor GemmaMlp::forward(const at::Tensor& x) {
  // gate, then up, then down, in that order (see LlamaMlp::forward: a recording pass may stop after its last input).
  const at::Tensor gate = at::gelu(gate_proj->forward(x), "tanh");
  const at::Tensor up = up_proj->forward(x);
  return down_proj->forward(gate * up);
}

at::Tensor GemmaDecoderLayer::forward(const at::Tensor& hidden, const LayerContext& context) {
  const at::Tensor attended = self_attn->forward(input_layernorm->forward(hidden), context);
  const at::Tensor h = hidden + post_attention_layernorm->forward(attended);
  return h + post_feedforward_layernorm->forward(mlp->forward(pre_feedforward_layernorm->forward(h)));
}

absl::StatusOr<std::shared_ptr<GemmaDecoderLayer>> GemmaDecoderLayer::Load(const checkpoint::ModelConfig& config,
                                                                           int64_t index, const WeightSource& weights,
                                                                           at::ScalarType dtype) {
  const std::string prefix = checkpoint::LayerPrefix(config, index);
  std::shared_ptr<GemmaDecoderLayer> layer(new GemmaDecoderLayer(index, prefix));
  auto attn = std::make_shared<GemmaAttention>();
  attn->heads = config.num_attention_heads;
  attn->kv_heads = config.num_key_value_heads;
  attn->head_dim = config.head_dim;
  attn->window = checkpoint::LayerAttentionWindow(config, index);
  attn->scale = 1.0 / std::sqrt(config.query_pre_attn_scalar);
  attn->softcap = config.attn_logit_softcapping;
  auto mlp = std::make_shared<GemmaMlp>();
  const std::vector<LinearSlot> slots = {{attn.get(), &attn->q_proj}, {attn.get(), &attn->k_proj},
                                         {attn.get(), &attn->v_proj}, {attn.get(), &attn->o_proj},
                                         {mlp.get(), &mlp->gate_proj}, {mlp.get(), &mlp->up_proj},
                                         {mlp.get(), &mlp->down_proj}};
  const auto specs = checkpoint::LayerLinears(config);
  QUARK_RETURN_IF_ERROR(LoadLinears(weights, prefix, specs, slots, dtype));
  std::shared_ptr<RmsNorm>* norms[] = {&layer->input_layernorm, &layer->post_attention_layernorm,
                                       &layer->pre_feedforward_layernorm, &layer->post_feedforward_layernorm};
  const char* norm_names[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                              "post_feedforward_layernorm"};
  for (size_t i = 0; i < std::size(norms); ++i) {
    auto norm = LoadGemmaNorm(weights, prefix + norm_names[i], config.hidden_size, config.rms_norm_eps, dtype);
    if (!norm.ok()) return norm.status();
    *norms[i] = *std::move(norm);
  }
  if (config.model_type == "gemma3_text") {
    auto q_norm = LoadGemmaNorm(weights, prefix + "self_attn.q_norm", config.head_dim, config.rms_norm_eps, dtype);
    if (!q_norm.ok()) return q_norm.status();
    auto k_norm = LoadGemmaNorm(weights, prefix + "self_attn.k_norm", config.head_dim, config.rms_norm_eps, dtype);
    if (!k_norm.ok()) return k_norm.status();
    attn->q_norm = attn->register_module("q_norm", *q_norm);
    attn->k_norm = attn->register_module("k_norm", *k_norm);
  }
  // Registered in forward order so named_modules lists them as HF does.
  layer->register_module("input_layernorm", layer->input_layernorm);
  layer->self_attn = layer->register_module("self_attn", attn);
  layer->register_module("post_attention_layernorm", layer->post_attention_layernorm);
  layer->register_module("pre_feedforward_layernorm", layer->pre_feedforward_layernorm);
  layer->mlp = layer->register_module("mlp", mlp);
  layer->register_module("post_feedforward_layernorm", layer->post_feedforward_layernorm);
  layer->AddLinears(specs, slots);
  return layer;
}

}  // namespace quark::runtime
