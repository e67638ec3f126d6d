#include "core/checkpoint/llama4_layout.h"

#include "core/base/strings.h"

namespace quark::checkpoint {

std::vector<LinearSpec> Llama4LayerLinears(const Llama4Config& c, int64_t layer) {
  const ModelConfig& b = c.base;
  const int64_t h = b.hidden_size, q = b.num_attention_heads * b.head_dim, kv = b.num_key_value_heads * b.head_dim;
  const bool bias = b.attention_bias;
  std::vector<LinearSpec> out = {{"self_attn.q_proj", q, h, bias, "input_layernorm"},
                                 {"self_attn.k_proj", kv, h, bias, "input_layernorm"},
                                 {"self_attn.v_proj", kv, h, bias, "input_layernorm"},
                                 {"self_attn.o_proj", h, q, bias, "self_attn"}};
  const auto add_mlp = [&out, h](const std::string& base, int64_t inter, bool routed) {
    const std::string input = routed ? base : "post_attention_layernorm";
    out.push_back({base + ".gate_proj", inter, h, false, input, routed});
    out.push_back({base + ".up_proj", inter, h, false, input, routed});
    out.push_back({base + ".down_proj", h, inter, false, base + ".act_fn", routed});
  };
  if (!c.IsMoeLayer(layer)) {
    add_mlp("feed_forward", c.intermediate_size_mlp, false);
    return out;
  }
  add_mlp("feed_forward.shared_expert", b.intermediate_size, false);
  for (int64_t e = 0; e < c.num_local_experts; ++e) add_mlp(quark::StrCat("feed_forward.experts.", e), b.intermediate_size, true);
  return out;
}

std::vector<std::string> Llama4GptqModules(const Llama4Config& c) {
  std::vector<std::string> out = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"};
  bool dense = false, moe = false;
  for (bool m : c.moe_layers) (m ? moe : dense) = true;
  if (dense) {
    for (const char* name : {"feed_forward.up_proj", "feed_forward.gate_proj", "feed_forward.down_proj"}) out.push_back(name);
  }
  if (moe) {
    for (const char* name : {"feed_forward.shared_expert.up_proj", "feed_forward.shared_expert.gate_proj",
                             "feed_forward.shared_expert.down_proj", "feed_forward.experts.*.up_proj",
                             "feed_forward.experts.*.gate_proj", "feed_forward.experts.*.down_proj"}) {
      out.push_back(name);
    }
  }
  return out;
}

std::vector<TensorSpec> Llama4LayerNorms(const Llama4Config& c, int64_t layer) {
  const std::string prefix = LayerPrefix(c.base, layer);
  return {{prefix + "input_layernorm.weight", {c.base.hidden_size}, TensorRole::kNormWeight},
          {prefix + "post_attention_layernorm.weight", {c.base.hidden_size}, TensorRole::kNormWeight}};
}

std::vector<TensorSpec> Llama4RouterTensors(const Llama4Config& c, int64_t layer) {
  if (!c.IsMoeLayer(layer)) return {};
  return {{LayerPrefix(c.base, layer) + "feed_forward.router.weight", {c.num_local_experts, c.base.hidden_size},
           TensorRole::kRouterWeight}};
}

std::vector<TensorSpec> Llama4ModelTensors(const Llama4Config& c) {
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {c.base.vocab_size, c.base.hidden_size}, TensorRole::kEmbedding});
  for (int64_t i = 0; i < c.base.num_hidden_layers; ++i) {
    const std::string prefix = LayerPrefix(c.base, i);
    for (const LinearSpec& l : Llama4LayerLinears(c, i)) {
      out.push_back({prefix + l.relative_name + ".weight", {l.out_features, l.in_features}, TensorRole::kLinearWeight});
      if (l.has_bias) out.push_back({prefix + l.relative_name + ".bias", {l.out_features}, TensorRole::kLinearBias});
    }
    for (TensorSpec& t : Llama4LayerNorms(c, i)) out.push_back(std::move(t));
    for (TensorSpec& t : Llama4RouterTensors(c, i)) out.push_back(std::move(t));
  }
  out.push_back({"model.norm.weight", {c.base.hidden_size}, TensorRole::kNormWeight});
  if (!c.base.tie_word_embeddings) {
    out.push_back({"lm_head.weight", {c.base.vocab_size, c.base.hidden_size}, TensorRole::kLinearWeight});
  }
  return out;
}

}  // namespace quark::checkpoint
