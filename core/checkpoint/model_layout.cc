#include "core/checkpoint/model_layout.h"

#include <set>

#include "core/base/strings.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/checkpoint/moe_layout.h"

namespace quark::checkpoint {
namespace {

bool IsOpt(const ModelConfig& config) { return config.family == ArchFamily::kOpt; }

void AddLinear(std::vector<TensorSpec>& out, const std::string& prefix, const LinearSpec& linear) {
  out.push_back({prefix + linear.relative_name + ".weight", {linear.out_features, linear.in_features}, TensorRole::kLinearWeight});
  if (linear.has_bias) out.push_back({prefix + linear.relative_name + ".bias", {linear.out_features}, TensorRole::kLinearBias});
}

void AddNorm(std::vector<TensorSpec>& out, const ModelConfig& config, const std::string& name, int64_t dim) {
  if (IsOpt(config) && !config.layer_norm_elementwise_affine) return;
  out.push_back({name + ".weight", {dim}, TensorRole::kNormWeight});
  if (IsOpt(config)) out.push_back({name + ".bias", {dim}, TensorRole::kNormBias});
}

}  // namespace

std::string LayerPrefix(const ModelConfig& config, int64_t layer) {
  return quark::StrCat(IsOpt(config) ? "model.decoder.layers." : "model.layers.", layer, ".");
}

std::string DecoderLayersName(const ModelConfig& config) {
  const std::string prefix = LayerPrefix(config, 0);  // "model.layers.0."
  return prefix.substr(0, prefix.size() - 3);
}

std::vector<LinearSpec> LayerLinears(const ModelConfig& c) {
  if (c.family == ArchFamily::kDeepseek || c.family == ArchFamily::kLlama4) {
    // Each layer's linears in order, each name once (DeepSeek: dense then MoE; Llama 4: interleaved).
    std::vector<LinearSpec> out;
    std::set<std::string> seen;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      for (LinearSpec& l : LayerLinears(c, i)) {
        if (seen.insert(l.relative_name).second) out.push_back(std::move(l));
      }
    }
    return out;
  }
  if (c.family == ArchFamily::kGptOss) return GptOssLayerLinears(*c.gpt_oss);  // every layer alike
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  if (IsOpt(c)) {
    const bool b = c.enable_bias;
    return {{"self_attn.q_proj", h, h, b, "self_attn_layer_norm"},
            {"self_attn.k_proj", h, h, b, "self_attn_layer_norm"},
            {"self_attn.v_proj", h, h, b, "self_attn_layer_norm"},
            {"self_attn.out_proj", h, h, b, "self_attn"},
            {"fc1", c.intermediate_size, h, b, "final_layer_norm"},
            {"fc2", h, c.intermediate_size, b, "activation_fn"}};
  }
  if (c.family == ArchFamily::kPhi3) {
    // Fused in the checkpoint, as vLLM loads them: rows q | k | v and gate | up (gate first).
    return {{"self_attn.qkv_proj", q + 2 * kv, h, false, "input_layernorm"},
            {"self_attn.o_proj", h, q, false, "self_attn"},
            {"mlp.gate_up_proj", 2 * c.intermediate_size, h, false, "post_attention_layernorm"},
            {"mlp.down_proj", h, c.intermediate_size, false, "mlp.act_fn"}};
  }
  // Llama-family attention (Gemma's has no biases: its config sets none).
  std::vector<LinearSpec> out = {{"self_attn.q_proj", q, h, c.attention_bias, "input_layernorm"},
                                 {"self_attn.k_proj", kv, h, c.attention_bias, "input_layernorm"},
                                 {"self_attn.v_proj", kv, h, c.attention_bias, "input_layernorm"},
                                 {"self_attn.o_proj", h, q, c.o_proj_bias, "self_attn"}};
  if (c.family == ArchFamily::kMoe) {
    // The experts in place of the MLP (moe_layout.h).
    for (LinearSpec& linear : MoeMlpLinears(c)) out.push_back(std::move(linear));
    return out;
  }
  // SwiGLU / GELU-tanh MLP. HF Gemma2/Gemma3DecoderLayer: the MLP reads pre_feedforward_layernorm
  // (post_attention_layernorm there normalizes the attention's output before the residual add).
  const std::string mlp_input = c.family == ArchFamily::kGemma ? "pre_feedforward_layernorm" : "post_attention_layernorm";
  out.push_back({"mlp.gate_proj", c.intermediate_size, h, c.mlp_bias, mlp_input});
  out.push_back({"mlp.up_proj", c.intermediate_size, h, c.mlp_bias, mlp_input});
  out.push_back({"mlp.down_proj", h, c.intermediate_size, c.mlp_bias, "mlp.act_fn"});
  return out;
}

std::vector<LinearSpec> LayerLinears(const ModelConfig& config, int64_t layer) {
  if (config.family == ArchFamily::kDeepseek) return DeepseekLayerLinears(*config.deepseek, layer);
  if (config.family == ArchFamily::kLlama4) return Llama4LayerLinears(*config.llama4, layer);
  return LayerLinears(config);
}

std::vector<TensorSpec> LayerRouterTensors(const ModelConfig& config, int64_t layer) {
  if (config.family == ArchFamily::kDeepseek) return DeepseekRouterTensors(*config.deepseek, layer);
  if (config.family == ArchFamily::kLlama4) return Llama4RouterTensors(*config.llama4, layer);
  if (config.family == ArchFamily::kGptOss) return GptOssFloatTensors(*config.gpt_oss, layer);  // router, its bias, sinks
  if (config.family == ArchFamily::kMoe) return MoeRouterTensors(config, layer);
  return {};
}

bool HasRoutedExperts(const ModelConfig& config) {
  return config.family == ArchFamily::kMoe || config.family == ArchFamily::kDeepseek ||
         config.family == ArchFamily::kLlama4 || config.family == ArchFamily::kGptOss;
}

bool IsOutsideForward(const ModelConfig& config, const std::string& tensor) {
  return config.family == ArchFamily::kDeepseek && IsDeepseekMtpTensor(*config.deepseek, tensor);
}

std::string EmbedTokensName(const ModelConfig& config) {
  return IsOpt(config) ? "model.decoder.embed_tokens" : "model.embed_tokens";
}

std::string FinalNormName(const ModelConfig& config) {
  return IsOpt(config) ? "model.decoder.final_layer_norm" : "model.norm";
}

std::vector<TensorSpec> LayerNormTensors(const ModelConfig& config, int64_t layer) {
  if (config.family == ArchFamily::kDeepseek) return DeepseekLayerNorms(*config.deepseek, layer);
  if (config.family == ArchFamily::kLlama4) return Llama4LayerNorms(*config.llama4, layer);
  if (config.family == ArchFamily::kGptOss) return GptOssLayerNorms(*config.gpt_oss, layer);
  std::vector<TensorSpec> out;
  const std::string prefix = LayerPrefix(config, layer);
  if (config.family == ArchFamily::kGemma) {
    // Four (1 + w) norms around attention and MLP; Gemma 3 also normalizes each head's q and k ([head_dim]).
    for (const char* norm : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                             "post_feedforward_layernorm"}) {
      AddNorm(out, config, prefix + norm, config.hidden_size);
    }
    if (config.model_type == "gemma3_text") {
      AddNorm(out, config, prefix + "self_attn.q_norm", config.head_dim);
      AddNorm(out, config, prefix + "self_attn.k_norm", config.head_dim);
    }
    return out;
  }
  if (IsOpt(config)) {
    AddNorm(out, config, prefix + "self_attn_layer_norm", config.hidden_size);
    AddNorm(out, config, prefix + "final_layer_norm", config.hidden_size);
  } else {
    AddNorm(out, config, prefix + "input_layernorm", config.hidden_size);
    AddNorm(out, config, prefix + "post_attention_layernorm", config.hidden_size);
  }
  if (config.qk_norm) {
    AddNorm(out, config, prefix + "self_attn.q_norm", config.head_dim);
    AddNorm(out, config, prefix + "self_attn.k_norm", config.head_dim);
  }
  return out;
}

std::vector<TensorSpec> ModelTensors(const ModelConfig& c) {
  if (c.family == ArchFamily::kDeepseek) return DeepseekModelTensors(*c.deepseek);
  if (c.family == ArchFamily::kLlama4) return Llama4ModelTensors(*c.llama4);
  if (c.family == ArchFamily::kGptOss) return GptOssSplitModelTensors(*c.gpt_oss);  // the experts per expert
  std::vector<TensorSpec> out;
  const bool opt = IsOpt(c);
  const int64_t embed_dim = opt ? c.word_embed_proj_dim : c.hidden_size;
  out.push_back({EmbedTokensName(c) + ".weight", {c.vocab_size, embed_dim}, TensorRole::kEmbedding});
  if (opt) {
    out.push_back({"model.decoder.embed_positions.weight", {c.max_position_embeddings + kOptPositionOffset, c.hidden_size},
                   TensorRole::kEmbedding});
    if (embed_dim != c.hidden_size) {
      out.push_back({"model.decoder.project_in.weight", {c.hidden_size, embed_dim}, TensorRole::kLinearWeight});
      out.push_back({"model.decoder.project_out.weight", {embed_dim, c.hidden_size}, TensorRole::kLinearWeight});
    }
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string prefix = LayerPrefix(c, i);
    for (const LinearSpec& linear : LayerLinears(c)) AddLinear(out, prefix, linear);
    for (TensorSpec& norm : LayerNormTensors(c, i)) out.push_back(std::move(norm));
    if (c.family == ArchFamily::kMoe) {
      for (TensorSpec& router : MoeRouterTensors(c, i)) out.push_back(std::move(router));
    }
  }
  // OPT-350m (post-LN) has no final layer norm.
  if (!opt || c.do_layer_norm_before) AddNorm(out, c, FinalNormName(c), c.hidden_size);
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, embed_dim}, TensorRole::kLinearWeight});
  return out;
}

}  // namespace quark::checkpoint
