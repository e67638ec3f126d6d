#include "core/runtime/phi3_layer.h"

#include <cmath>

#include "core/base/status_macros.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {

at::Tensor Phi3Attention::forward(const at::Tensor& x, const LayerContext& context) {
  const int64_t batch = x.size(0), seq = x.size(1);
  const int64_t q_width = heads * head_dim, kv_width = kv_heads * head_dim;
  const at::Tensor qkv = qkv_proj->forward(x);  // [B, T, q | k | v]
  // [B, T, H*D] -> [B, H, T, D]
  at::Tensor q = qkv.narrow(-1, 0, q_width).reshape({batch, seq, heads, head_dim}).transpose(1, 2);
  at::Tensor k = qkv.narrow(-1, q_width, kv_width).reshape({batch, seq, kv_heads, head_dim}).transpose(1, 2);
  const at::Tensor v =
      qkv.narrow(-1, q_width + kv_width, kv_width).reshape({batch, seq, kv_heads, head_dim}).transpose(1, 2).contiguous();
  q = ApplyRope(q, context.cos, context.sin);
  k = ApplyRope(k, context.cos, context.sin);
  TORCH_CHECK(window == 0 || (context.sliding_window == window && context.sliding_mask.defined()), "layer window ",
              window, " but the context was built for window ", context.sliding_window);
  const at::Tensor& mask = window > 0 ? context.sliding_mask : context.mask;
  const at::Tensor attended = CausalAttention(q.contiguous(), k.contiguous(), v, mask, 1.0 / std::sqrt(head_dim));
  return o_proj->forward(attended);
}

at::Tensor Phi3Mlp::forward(const at::Tensor& x) {
  const at::Tensor gate_up = gate_up_proj->forward(x);  // [B, T, gate | up], HF's chunk(2) order
  const at::Tensor gate = gate_up.narrow(-1, 0, intermediate);
  const at::Tensor up = gate_up.narrow(-1, intermediate, intermediate);
  return down_proj->forward(at::silu(gate) * up);
}

at::Tensor Phi3DecoderLayer::forward(const at::Tensor& hidden, const LayerContext& context) {
  at::Tensor h = hidden + self_attn->forward(input_layernorm->forward(hidden), context);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

absl::StatusOr<std::shared_ptr<Phi3DecoderLayer>> Phi3DecoderLayer::Load(const checkpoint::ModelConfig& config,
                                                                         int64_t index, const WeightSource& weights,
                                                                         at::ScalarType dtype) {
  const std::string prefix = checkpoint::LayerPrefix(config, index);
  std::shared_ptr<Phi3DecoderLayer> layer(new Phi3DecoderLayer(index, prefix));
  auto attn = std::make_shared<Phi3Attention>();
  attn->heads = config.num_attention_heads;
  attn->kv_heads = config.num_key_value_heads;
  attn->head_dim = config.head_dim;
  attn->window = checkpoint::LayerAttentionWindow(config, index);
  auto mlp = std::make_shared<Phi3Mlp>();
  mlp->intermediate = config.intermediate_size;
  // checkpoint::LayerLinears' phi3 order: qkv_proj, o_proj, gate_up_proj, down_proj.
  const std::vector<LinearSlot> slots = {{attn.get(), &attn->qkv_proj}, {attn.get(), &attn->o_proj},
                                         {mlp.get(), &mlp->gate_up_proj}, {mlp.get(), &mlp->down_proj}};
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
