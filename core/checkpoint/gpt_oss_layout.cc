#include "core/checkpoint/gpt_oss_layout.h"

#include "core/base/strings.h"

namespace quark::checkpoint {

std::vector<LinearSpec> GptOssLayerLinears(const GptOssConfig& c) {
  const ModelConfig& b = c.base;
  const int64_t h = b.hidden_size, q = b.num_attention_heads * b.head_dim, kv = b.num_key_value_heads * b.head_dim;
  const bool bias = b.attention_bias;
  std::vector<LinearSpec> out = {{"self_attn.q_proj", q, h, bias, "input_layernorm"},
                                 {"self_attn.k_proj", kv, h, bias, "input_layernorm"},
                                 {"self_attn.v_proj", kv, h, bias, "input_layernorm"},
                                 {"self_attn.o_proj", h, q, bias, "self_attn"}};
  const int64_t inter = b.intermediate_size;
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    const std::string expert = StrCat("mlp.experts.", e);
    out.push_back({expert + ".gate_up_proj", 2 * inter, h, true, expert, /*routed=*/true});
    out.push_back({expert + ".down_proj", h, inter, true, expert + ".act_fn", /*routed=*/true});
  }
  return out;
}

std::vector<std::string> GptOssGptqModules() {
  return {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.experts.*.gate_up_proj",
          "mlp.experts.*.down_proj"};
}

std::vector<TensorSpec> GptOssLayerNorms(const GptOssConfig& c, int64_t layer) {
  const std::string prefix = LayerPrefix(c.base, layer);
  return {{prefix + "input_layernorm.weight", {c.base.hidden_size}, TensorRole::kNormWeight},
          {prefix + "post_attention_layernorm.weight", {c.base.hidden_size}, TensorRole::kNormWeight}};
}

// Router, sinks and the fused experts are never quantizable modules: kRouterWeight (seeded like a weight by the
// synthetic maker, so that biases and sinks are not zero in tests).
std::vector<TensorSpec> GptOssFloatTensors(const GptOssConfig& c, int64_t layer) {
  const std::string prefix = LayerPrefix(c.base, layer);
  const int64_t experts = c.num_local_experts;
  return {{prefix + "self_attn.sinks", {c.base.num_attention_heads}, TensorRole::kRouterWeight},
          {prefix + "mlp.router.weight", {experts, c.base.hidden_size}, TensorRole::kRouterWeight},
          {prefix + "mlp.router.bias", {experts}, TensorRole::kRouterWeight}};
}

std::vector<TensorSpec> GptOssExpertTensors(const GptOssConfig& c, int64_t layer) {
  const std::string prefix = LayerPrefix(c.base, layer) + "mlp.experts.";
  const int64_t e = c.num_local_experts, h = c.base.hidden_size, inter = c.base.intermediate_size;
  return {{prefix + "gate_up_proj", {e, h, 2 * inter}, TensorRole::kRouterWeight},
          {prefix + "gate_up_proj_bias", {e, 2 * inter}, TensorRole::kRouterWeight},
          {prefix + "down_proj", {e, inter, h}, TensorRole::kRouterWeight},
          {prefix + "down_proj_bias", {e, h}, TensorRole::kRouterWeight}};
}

std::vector<TensorSpec> GptOssModelTensors(const GptOssConfig& c) {
  const ModelConfig& b = c.base;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {b.vocab_size, b.hidden_size}, TensorRole::kEmbedding});
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) {
    const std::string prefix = LayerPrefix(b, i);
    for (const LinearSpec& l : GptOssLayerLinears(c)) {
      if (l.routed) continue;  // the experts are stored fused (GptOssExpertTensors)
      out.push_back({prefix + l.relative_name + ".weight", {l.out_features, l.in_features}, TensorRole::kLinearWeight});
      // kRouterWeight: seeded by the synthetic maker (a zero bias would hide how it is applied).
      if (l.has_bias) out.push_back({prefix + l.relative_name + ".bias", {l.out_features}, TensorRole::kRouterWeight});
    }
    for (TensorSpec& t : GptOssLayerNorms(c, i)) out.push_back(std::move(t));
    for (TensorSpec& t : GptOssFloatTensors(c, i)) out.push_back(std::move(t));
    for (TensorSpec& t : GptOssExpertTensors(c, i)) out.push_back(std::move(t));
  }
  out.push_back({"model.norm.weight", {b.hidden_size}, TensorRole::kNormWeight});
  if (!b.tie_word_embeddings) out.push_back({"lm_head.weight", {b.vocab_size, b.hidden_size}, TensorRole::kLinearWeight});
  return out;
}

}  // namespace quark::checkpoint
