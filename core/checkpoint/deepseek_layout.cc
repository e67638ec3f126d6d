#include "core/checkpoint/deepseek_layout.h"

#include <cstdlib>

#include "core/base/strings.h"

namespace quark::checkpoint {
namespace {

void AddLinears(std::vector<TensorSpec>& out, const std::string& prefix, const std::vector<LinearSpec>& linears) {
  for (const LinearSpec& l : linears) {
    out.push_back({prefix + l.relative_name + ".weight", {l.out_features, l.in_features}, TensorRole::kLinearWeight});
    if (l.has_bias) out.push_back({prefix + l.relative_name + ".bias", {l.out_features}, TensorRole::kLinearBias});
  }
}

void AddLayer(std::vector<TensorSpec>& out, const DeepseekConfig& c, int64_t layer) {
  AddLinears(out, LayerPrefix(c.base, layer), DeepseekLayerLinears(c, layer));
  for (TensorSpec& t : DeepseekLayerNorms(c, layer)) out.push_back(std::move(t));
  for (TensorSpec& t : DeepseekRouterTensors(c, layer)) out.push_back(std::move(t));
}

}  // namespace

std::vector<LinearSpec> DeepseekLayerLinears(const DeepseekConfig& c, int64_t layer) {
  const int64_t h = c.base.hidden_size, heads = c.base.num_attention_heads;
  const bool bias = c.base.attention_bias;
  std::vector<LinearSpec> out;
  if (c.q_lora_rank > 0) {
    out.push_back({"self_attn.q_a_proj", c.q_lora_rank, h, bias, "input_layernorm"});
  } else {
    out.push_back({"self_attn.q_proj", heads * c.qk_head_dim(), h, false, "input_layernorm"});
  }
  out.push_back({"self_attn.kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, h, bias, "input_layernorm"});
  if (c.q_lora_rank > 0) {
    out.push_back({"self_attn.q_b_proj", heads * c.qk_head_dim(), c.q_lora_rank, false, "self_attn.q_a_layernorm"});
  }
  out.push_back({"self_attn.kv_b_proj", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, false,
                 "self_attn.kv_a_layernorm"});
  out.push_back({"self_attn.o_proj", h, heads * c.v_head_dim, bias, "self_attn"});
  if (!c.IsMoeLayer(layer)) {
    const int64_t inter = c.base.intermediate_size;
    out.push_back({"mlp.gate_proj", inter, h, false, "post_attention_layernorm"});
    out.push_back({"mlp.up_proj", inter, h, false, "post_attention_layernorm"});
    out.push_back({"mlp.down_proj", h, inter, false, "mlp.act_fn"});
    return out;
  }
  const int64_t shared = c.moe_intermediate_size * c.n_shared_experts;
  out.push_back({"mlp.shared_experts.gate_proj", shared, h, false, "post_attention_layernorm"});
  out.push_back({"mlp.shared_experts.up_proj", shared, h, false, "post_attention_layernorm"});
  out.push_back({"mlp.shared_experts.down_proj", h, shared, false, "mlp.shared_experts.act_fn"});
  const int64_t inter = c.moe_intermediate_size;
  for (int64_t e = 0; e < c.n_routed_experts; ++e) {
    const std::string expert = quark::StrCat("mlp.experts.", e);
    out.push_back({expert + ".gate_proj", inter, h, false, expert, /*routed=*/true});
    out.push_back({expert + ".up_proj", inter, h, false, expert, /*routed=*/true});
    out.push_back({expert + ".down_proj", h, inter, false, expert + ".act_fn", /*routed=*/true});
  }
  return out;
}

std::vector<std::string> DeepseekGptqModules(const DeepseekConfig& c) {
  std::vector<std::string> out;
  if (c.q_lora_rank > 0) {
    out = {"self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.q_b_proj"};
  } else {
    out = {"self_attn.q_proj", "self_attn.kv_a_proj_with_mqa"};
  }
  out.push_back("self_attn.kv_b_proj");
  out.push_back("self_attn.o_proj");
  if (c.first_k_dense_replace > 0) {
    for (const char* name : {"mlp.up_proj", "mlp.gate_proj", "mlp.down_proj"}) out.push_back(name);
  }
  if (c.first_k_dense_replace < c.base.num_hidden_layers) {
    for (const char* name : {"mlp.shared_experts.up_proj", "mlp.shared_experts.gate_proj", "mlp.shared_experts.down_proj",
                             "mlp.experts.*.up_proj", "mlp.experts.*.gate_proj", "mlp.experts.*.down_proj"}) {
      out.push_back(name);
    }
  }
  return out;
}

std::vector<TensorSpec> DeepseekLayerNorms(const DeepseekConfig& c, int64_t layer) {
  const std::string prefix = LayerPrefix(c.base, layer);
  std::vector<TensorSpec> out = {{prefix + "input_layernorm.weight", {c.base.hidden_size}, TensorRole::kNormWeight},
                                 {prefix + "post_attention_layernorm.weight", {c.base.hidden_size}, TensorRole::kNormWeight}};
  if (c.q_lora_rank > 0) out.push_back({prefix + "self_attn.q_a_layernorm.weight", {c.q_lora_rank}, TensorRole::kNormWeight});
  out.push_back({prefix + "self_attn.kv_a_layernorm.weight", {c.kv_lora_rank}, TensorRole::kNormWeight});
  return out;
}

std::vector<TensorSpec> DeepseekRouterTensors(const DeepseekConfig& c, int64_t layer) {
  if (!c.IsMoeLayer(layer)) return {};
  const std::string prefix = LayerPrefix(c.base, layer);
  return {{prefix + "mlp.gate.weight", {c.n_routed_experts, c.base.hidden_size}, TensorRole::kRouterWeight},
          {prefix + "mlp.gate.e_score_correction_bias", {c.n_routed_experts}, TensorRole::kRouterWeight}};
}

std::vector<TensorSpec> DeepseekMtpTensors(const DeepseekConfig& c, int64_t mtp) {
  const int64_t layer = c.base.num_hidden_layers + mtp, h = c.base.hidden_size;
  const std::string prefix = LayerPrefix(c.base, layer);
  std::vector<TensorSpec> out = {{prefix + "embed_tokens.weight", {c.base.vocab_size, h}, TensorRole::kEmbedding},
                                 {prefix + "enorm.weight", {h}, TensorRole::kNormWeight},
                                 {prefix + "hnorm.weight", {h}, TensorRole::kNormWeight},
                                 {prefix + "eh_proj.weight", {h, 2 * h}, TensorRole::kLinearWeight}};
  AddLayer(out, c, layer);
  out.push_back({prefix + "shared_head.norm.weight", {h}, TensorRole::kNormWeight});
  out.push_back({prefix + "shared_head.head.weight", {c.base.vocab_size, h}, TensorRole::kLinearWeight});
  return out;
}

bool IsDeepseekMtpTensor(const DeepseekConfig& c, const std::string& tensor) {
  const std::string layers = "model.layers.";
  if (tensor.compare(0, layers.size(), layers) != 0) return false;
  const char* start = tensor.c_str() + layers.size();
  char* end = nullptr;
  const long long index = std::strtoll(start, &end, 10);
  return end != start && *end == '.' && index >= c.base.num_hidden_layers;
}

std::vector<TensorSpec> DeepseekModelTensors(const DeepseekConfig& c) {
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {c.base.vocab_size, c.base.hidden_size}, TensorRole::kEmbedding});
  for (int64_t i = 0; i < c.base.num_hidden_layers; ++i) AddLayer(out, c, i);
  for (int64_t m = 0; m < c.num_nextn_predict_layers; ++m) {
    for (TensorSpec& t : DeepseekMtpTensors(c, m)) out.push_back(std::move(t));
  }
  out.push_back({"model.norm.weight", {c.base.hidden_size}, TensorRole::kNormWeight});
  if (!c.base.tie_word_embeddings) {
    out.push_back({"lm_head.weight", {c.base.vocab_size, c.base.hidden_size}, TensorRole::kLinearWeight});
  }
  return out;
}

}  // namespace quark::checkpoint
