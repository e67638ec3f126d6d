#include "core/checkpoint/deepseek_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/base/strings.h"
#include "core/checkpoint/config_fields.h"
#include "core/checkpoint/config_limits.h"
#include "core/checkpoint/yarn_config.h"

namespace quark::checkpoint {
namespace {

using nlohmann::json;

// A string field that must equal `only` when present (DeepSeek-V3's scoring_func, topk_method).
absl::Status RequireString(const json& root, const std::string& label, const std::string& field, const std::string& only) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string() && it->get<std::string>() == only) return absl::OkStatus();
  return ConfigFieldError(label, field, quark::StrCat("= ", it->dump(), " is not supported (only \"", only, "\")"));
}

// The Llama-shared fields (sizes, eps, theta, token ids) read by ParseModelConfig under model_type "llama", with
// DeepSeek's head_dim (the RoPE part of a head) and without its rope_scaling (read by ParseYarnScaling).
absl::Status ParseBase(const json& root, const std::string& label, DeepseekConfig& c) {
  json llama = root;
  llama["model_type"] = "llama";
  llama.erase("rope_scaling");
  llama.erase("sliding_window");
  llama["head_dim"] = c.qk_rope_head_dim;
  auto base = ParseModelConfig(llama.dump(), label);
  if (!base.ok()) return base.status();
  c.base = *std::move(base);
  c.base.model_type = "deepseek_v3";
  if (c.base.num_key_value_heads != c.base.num_attention_heads) {
    return ConfigFieldError(label, "num_key_value_heads", quark::StrCat("= ", c.base.num_key_value_heads,
                      " differs from num_attention_heads = ", c.base.num_attention_heads, " (MLA has one KV head per query head)"));
  }
  if (c.base.mlp_bias) return ConfigFieldError(label, "mlp_bias", "= true is not supported for deepseek_v3");
  return absl::OkStatus();
}

absl::Status ParseAttention(const json& root, const std::string& label, DeepseekConfig& c) {
  auto q_lora = root.find("q_lora_rank");
  if (q_lora != root.end() && !q_lora->is_null()) {
    if (auto s = ReadPositiveField(root, label, "q_lora_rank", 0, kMaxHiddenSize, &c.q_lora_rank); !s.ok()) return s;
  }
  if (auto s = ReadPositiveField(root, label, "kv_lora_rank", 0, kMaxHiddenSize, &c.kv_lora_rank); !s.ok()) return s;
  if (auto s = ReadPositiveField(root, label, "qk_nope_head_dim", 0, kMaxHeadDim, &c.qk_nope_head_dim); !s.ok()) return s;
  if (auto s = ReadPositiveField(root, label, "qk_rope_head_dim", 0, kMaxHeadDim, &c.qk_rope_head_dim); !s.ok()) return s;
  if (auto s = ReadPositiveField(root, label, "v_head_dim", 0, kMaxHeadDim, &c.v_head_dim); !s.ok()) return s;
  if (c.qk_rope_head_dim % 2 != 0) {
    return ConfigFieldError(label, "qk_rope_head_dim", quark::StrCat("= ", c.qk_rope_head_dim, " must be even for RoPE"));
  }
  auto interleave = root.find("rope_interleave");
  if (interleave != root.end() && !interleave->is_null()) {
    if (!interleave->is_boolean()) {
      return ConfigFieldError(label, "rope_interleave", quark::StrCat("= ", interleave->dump(), " is not a boolean"));
    }
    c.rope_interleave = interleave->get<bool>();
  }
  return absl::OkStatus();
}

absl::Status ParseMoe(const json& root, const std::string& label, DeepseekConfig& c) {
  if (auto s = RequireString(root, label, "scoring_func", "sigmoid"); !s.ok()) return s;
  if (auto s = RequireString(root, label, "topk_method", "noaux_tc"); !s.ok()) return s;
  if (auto s = ReadPositiveField(root, label, "n_routed_experts", 0, kMaxExperts, &c.n_routed_experts); !s.ok()) return s;
  if (c.base.num_hidden_layers * c.n_routed_experts > kMaxLayerExperts) {
    return ConfigFieldError(label, "n_routed_experts", quark::StrCat("= ", c.n_routed_experts, " in each of ",
                      c.base.num_hidden_layers, " layers is above the limit of ", kMaxLayerExperts, " experts in all"));
  }
  if (auto s = ReadPositiveField(root, label, "n_shared_experts", 0, kMaxExperts, &c.n_shared_experts); !s.ok()) return s;
  if (auto s = ReadPositiveField(root, label, "num_experts_per_tok", 0, kMaxExperts, &c.num_experts_per_tok); !s.ok()) return s;
  if (auto s = ReadPositiveField(root, label, "moe_intermediate_size", 0, kMaxIntermediateSize, &c.moe_intermediate_size); !s.ok()) {
    return s;
  }
  if (c.moe_intermediate_size * c.n_shared_experts > kMaxIntermediateSize) {
    return ConfigFieldError(label, "n_shared_experts", quark::StrCat("= ", c.n_shared_experts, " makes the shared expert ",
                      c.moe_intermediate_size * c.n_shared_experts, " wide, above the limit ", kMaxIntermediateSize));
  }
  if (auto s = ReadPositiveField(root, label, "n_group", 1, kMaxExperts, &c.n_group); !s.ok()) return s;
  if (auto s = ReadPositiveField(root, label, "topk_group", 1, kMaxExperts, &c.topk_group); !s.ok()) return s;
  if (c.n_routed_experts % c.n_group != 0) {
    return ConfigFieldError(label, "n_group", quark::StrCat("= ", c.n_group, " does not divide n_routed_experts = ",
                                                     c.n_routed_experts));
  }
  const int64_t per_group = c.n_routed_experts / c.n_group;
  if (c.topk_group > c.n_group) {
    return ConfigFieldError(label, "topk_group", quark::StrCat("= ", c.topk_group, " exceeds n_group = ", c.n_group));
  }
  // HF scores a group by its two best experts (topk(2)); a group of one expert cannot be scored that way.
  if (per_group < 2) {
    return ConfigFieldError(label, "n_group", quark::StrCat("= ", c.n_group, " leaves ", per_group,
                      " expert per group (the group score sums each group's best two)"));
  }
  if (c.num_experts_per_tok > c.topk_group * per_group) {
    return ConfigFieldError(label, "num_experts_per_tok", quark::StrCat("= ", c.num_experts_per_tok, " exceeds the ",
                      c.topk_group * per_group, " experts of the topk_group = ", c.topk_group, " chosen groups"));
  }
  auto factor = ReadNumberOr(root, label, "routed_scaling_factor", "routed_scaling_factor", 1.0);
  if (!factor.ok()) return factor.status();
  if (*factor <= 0) return ConfigFieldError(label, "routed_scaling_factor", quark::StrCat("= ", *factor, " must be positive"));
  c.routed_scaling_factor = *factor;
  auto norm = root.find("norm_topk_prob");
  if (norm != root.end() && !norm->is_null()) {
    if (!norm->is_boolean()) return ConfigFieldError(label, "norm_topk_prob", quark::StrCat("= ", norm->dump(), " is not a boolean"));
    c.norm_topk_prob = norm->get<bool>();
  }
  auto freq = root.find("moe_layer_freq");
  if (freq != root.end() && !freq->is_null() && !(freq->is_number_integer() && freq->get<int64_t>() == 1)) {
    return ConfigFieldError(label, "moe_layer_freq", quark::StrCat("= ", freq->dump(), " is not supported (only 1)"));
  }
  auto dense = root.find("first_k_dense_replace");
  if (dense != root.end() && !dense->is_null()) {
    if (!dense->is_number_integer() || dense->get<int64_t>() < 0 || dense->get<int64_t>() > c.base.num_hidden_layers) {
      return ConfigFieldError(label, "first_k_dense_replace", quark::StrCat("= ", dense->dump(), " is not an integer in [0, ",
                        c.base.num_hidden_layers, "]"));
    }
    c.first_k_dense_replace = dense->get<int64_t>();
  }
  auto mtp = root.find("num_nextn_predict_layers");
  if (mtp != root.end() && !mtp->is_null()) {
    if (!mtp->is_number_integer() || mtp->get<int64_t>() < 0 || mtp->get<int64_t>() > 16) {
      return ConfigFieldError(label, "num_nextn_predict_layers", quark::StrCat("= ", mtp->dump(), " is not an integer in [0, 16]"));
    }
    c.num_nextn_predict_layers = mtp->get<int64_t>();
  }
  return absl::OkStatus();
}

}  // namespace

bool IsDeepseekModelType(const std::string& model_type) { return model_type == "deepseek_v3"; }

absl::StatusOr<DeepseekConfig> ParseDeepseekConfig(const std::string& json_text, const std::string& label) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return absl::InvalidArgumentError(quark::StrCat(label, ": not a JSON object"));
  auto type = root.find("model_type");
  if (type == root.end() || !type->is_string() || !IsDeepseekModelType(type->get<std::string>())) {
    return ConfigFieldError(label, "model_type", quark::StrCat("= ", type == root.end() ? "null" : type->dump(),
                                                        " is not deepseek_v3"));
  }
  DeepseekConfig c;
  if (auto s = ParseAttention(root, label, c); !s.ok()) return s;
  if (auto s = ParseBase(root, label, c); !s.ok()) return s;
  if (auto s = ParseMoe(root, label, c); !s.ok()) return s;
  auto yarn = ParseYarnScaling(root, label, "deepseek_v3", c.base.max_position_embeddings);
  if (!yarn.ok()) return yarn.status();
  c.yarn = *yarn;
  return c;
}

std::string DeepseekConfigToJson(const DeepseekConfig& c) {
  json root = json::parse(ModelConfigToJson(c.base));
  root["architectures"] = {"DeepseekV3ForCausalLM"};
  root["model_type"] = "deepseek_v3";
  root["num_key_value_heads"] = c.base.num_attention_heads;
  root.erase("head_dim");
  root.erase("mlp_bias");
  root.erase("rope_scaling");
  root["q_lora_rank"] = c.q_lora_rank > 0 ? json(c.q_lora_rank) : json(nullptr);
  root["kv_lora_rank"] = c.kv_lora_rank;
  root["qk_nope_head_dim"] = c.qk_nope_head_dim;
  root["qk_rope_head_dim"] = c.qk_rope_head_dim;
  root["v_head_dim"] = c.v_head_dim;
  root["n_routed_experts"] = c.n_routed_experts;
  root["n_shared_experts"] = c.n_shared_experts;
  root["num_experts_per_tok"] = c.num_experts_per_tok;
  root["moe_intermediate_size"] = c.moe_intermediate_size;
  root["n_group"] = c.n_group;
  root["topk_group"] = c.topk_group;
  root["first_k_dense_replace"] = c.first_k_dense_replace;
  root["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  root["routed_scaling_factor"] = c.routed_scaling_factor;
  root["norm_topk_prob"] = c.norm_topk_prob;
  root["rope_interleave"] = c.rope_interleave;
  root["scoring_func"] = "sigmoid";
  root["topk_method"] = "noaux_tc";
  root["moe_layer_freq"] = 1;
  if (c.yarn) root["rope_scaling"] = YarnScalingToJson(*c.yarn, "type");
  return root.dump(2) + "\n";
}

}  // namespace quark::checkpoint
