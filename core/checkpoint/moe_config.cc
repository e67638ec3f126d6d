#include "core/checkpoint/moe_config.h"

#include "core/base/strings.h"
#include "core/checkpoint/config_fields.h"
#include "core/checkpoint/config_limits.h"

namespace quark::checkpoint {
namespace {

using nlohmann::json;

// A positive integer field within its SizeLimitOf; `fallback` when absent or null (0 = required).
absl::Status ReadPositive(const json& root, const std::string& label, const std::string& field, int64_t fallback,
                          int64_t* out) {
  return ReadPositiveField(root, label, field, fallback, /*limit=*/0, out);
}

bool BoolOr(const json& root, const std::string& field, bool fallback) {
  auto it = root.find(field);
  return it != root.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// Qwen's MoE configs may make some layers dense (HF: layer i is sparse when i is not in mlp_only_layers and
// (i + 1) % decoder_sparse_step == 0). The layout here has one set of linears for every layer, so those are refused.
absl::Status CheckAllLayersSparse(const json& root, const std::string& label) {
  auto step = root.find("decoder_sparse_step");
  if (step != root.end() && !step->is_null() && !(step->is_number_integer() && step->get<int64_t>() == 1)) {
    return ConfigFieldError(label, "decoder_sparse_step",
                            quark::StrCat("= ", step->dump(), " is not supported (only 1: every layer sparse; "
                                          "dense MLP layers between MoE layers are not built)"));
  }
  auto dense = root.find("mlp_only_layers");
  if (dense != root.end() && !dense->is_null() && !(dense->is_array() && dense->empty())) {
    return ConfigFieldError(label, "mlp_only_layers", quark::StrCat("= ", dense->dump(), " is not supported (only []: "
                            "dense MLP layers between MoE layers are not built)"));
  }
  return absl::OkStatus();
}

const char* Architecture(const std::string& model_type) {
  if (model_type == "mixtral") return "MixtralForCausalLM";
  if (model_type == "qwen2_moe") return "Qwen2MoeForCausalLM";
  return "Qwen3MoeForCausalLM";
}

}  // namespace

bool IsMoeModelType(const std::string& model_type) {
  return model_type == "mixtral" || model_type == "qwen2_moe" || model_type == "qwen3_moe";
}

absl::Status ParseMoeFields(const json& root, const std::string& label, ModelConfig& config) {
  const bool mixtral = config.model_type == "mixtral";
  if (auto s = ReadPositive(root, label, mixtral ? "num_local_experts" : "num_experts", 0, &config.num_experts); !s.ok()) {
    return s;
  }
  if (config.num_hidden_layers * config.num_experts > kMaxLayerExperts) {  // both bounded: no overflow
    return ConfigFieldError(label, mixtral ? "num_local_experts" : "num_experts",
                            quark::StrCat("= ", config.num_experts, " in each of ", config.num_hidden_layers,
                                          " layers is above the limit of ", kMaxLayerExperts, " experts in all"));
  }
  if (auto s = ReadPositive(root, label, "num_experts_per_tok", 0, &config.num_experts_per_tok); !s.ok()) return s;
  if (config.num_experts_per_tok > config.num_experts) {
    return ConfigFieldError(label, "num_experts_per_tok", quark::StrCat("= ", config.num_experts_per_tok,
                            " exceeds the number of experts (", config.num_experts, ")"));
  }
  if (mixtral) {
    // Mixtral's experts are intermediate_size wide and its top-k weights always sum to 1 (HF MixtralSparseMoeBlock).
    config.moe_intermediate_size = config.intermediate_size;
    config.norm_topk_prob = true;
    // Like Mistral: a window on every layer when given (null in the released 8x7B and 8x22B configs).
    config.sliding_window = 0;
    config.sliding_window_layers.clear();
    auto window = root.find("sliding_window");
    if (window != root.end() && !window->is_null()) {
      if (!window->is_number_integer() || window->get<int64_t>() <= 0) {
        return ConfigFieldError(label, "sliding_window", quark::StrCat("= ", window->dump(), " must be a positive integer or null"));
      }
      config.sliding_window = window->get<int64_t>();
    }
    config.attention_bias = config.o_proj_bias = false;
    config.mlp_bias = false;
    return absl::OkStatus();
  }
  if (auto s = ReadPositive(root, label, "moe_intermediate_size", 0, &config.moe_intermediate_size); !s.ok()) return s;
  if (auto s = CheckAllLayersSparse(root, label); !s.ok()) return s;
  if (BoolOr(root, "use_sliding_window", false)) {
    return ConfigFieldError(label, "use_sliding_window", "= true is not supported for " + config.model_type);
  }
  config.sliding_window = 0;
  config.sliding_window_layers.clear();
  config.mlp_bias = false;
  if (config.model_type == "qwen2_moe") {
    // Qwen1.5-MoE: the top-k weights are used as the softmax gives them (HF's default norm_topk_prob false).
    config.norm_topk_prob = BoolOr(root, "norm_topk_prob", false);
    if (auto s = ReadPositive(root, label, "shared_expert_intermediate_size", 0, &config.shared_expert_intermediate_size);
        !s.ok()) {
      return s;
    }
    config.attention_bias = true;  // q/k/v as Qwen2; o_proj has none
    config.o_proj_bias = false;
    config.qk_norm = false;
    return absl::OkStatus();
  }
  // qwen3_moe: Qwen3's attention (per-head q_norm / k_norm, attention_bias on all four projections).
  config.norm_topk_prob = BoolOr(root, "norm_topk_prob", true);
  config.shared_expert_intermediate_size = 0;
  config.attention_bias = config.o_proj_bias = BoolOr(root, "attention_bias", false);
  config.qk_norm = true;
  return absl::OkStatus();
}

void WriteMoeFields(const ModelConfig& c, json& root) {
  root["architectures"] = {Architecture(c.model_type)};
  root["num_experts_per_tok"] = c.num_experts_per_tok;
  if (c.model_type == "mixtral") {
    root["num_local_experts"] = c.num_experts;
    root["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
    root.erase("attention_bias");
    root.erase("mlp_bias");
    return;
  }
  root["num_experts"] = c.num_experts;
  root["moe_intermediate_size"] = c.moe_intermediate_size;
  root["norm_topk_prob"] = c.norm_topk_prob;
  root["decoder_sparse_step"] = 1;
  root["mlp_only_layers"] = json::array();
  root["use_sliding_window"] = false;
  root["sliding_window"] = nullptr;
  if (c.model_type == "qwen2_moe") {
    root["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
    root.erase("attention_bias");
  } else {
    root["attention_bias"] = c.attention_bias;
  }
}

}  // namespace quark::checkpoint
