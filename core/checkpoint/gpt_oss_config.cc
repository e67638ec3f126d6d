#include "core/checkpoint/gpt_oss_config.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/base/strings.h"
#include "core/checkpoint/config_fields.h"
#include "core/checkpoint/config_limits.h"

namespace quark::checkpoint {
namespace {

using nlohmann::json;

// Newer transformers write `rope_parameters` ({rope_theta, rope_type, factor, ...}) in place of rope_theta and
// rope_scaling: read as those two.
absl::Status NormalizeRopeParameters(json& root, const std::string& label) {
  auto it = root.find("rope_parameters");
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return ConfigFieldError(label, "rope_parameters", StrCat("= ", it->dump(), " is not an object"));
  if (root.contains("rope_scaling") && !root["rope_scaling"].is_null()) {
    return ConfigFieldError(label, "rope_parameters", "is given beside rope_scaling (one of the two)");
  }
  json scaling = *it;
  if (scaling.contains("rope_theta")) root["rope_theta"] = scaling["rope_theta"];
  scaling.erase("rope_theta");
  const auto type = scaling.find("rope_type");
  if (type == scaling.end() || (type->is_string() && type->get<std::string>() == "default")) {
    root.erase("rope_scaling");
  } else {
    root["rope_scaling"] = scaling;
  }
  return absl::OkStatus();
}

// The fields shared with Llama, read by ParseModelConfig as model_type "llama" (window, layer types and YaRN apart).
absl::Status ParseBase(const json& root, const std::string& label, GptOssConfig& c) {
  json llama = root;
  llama["model_type"] = "llama";
  for (const char* key : {"rope_scaling", "sliding_window", "layer_types", "quantization_config"}) llama.erase(key);
  if (!llama.contains("attention_bias") || llama["attention_bias"].is_null()) llama["attention_bias"] = true;  // HF's default
  if (!llama.contains("rms_norm_eps") || llama["rms_norm_eps"].is_null()) llama["rms_norm_eps"] = 1e-5;
  if (!llama.contains("rope_theta") || llama["rope_theta"].is_null()) llama["rope_theta"] = 150000.0;
  auto base = ParseModelConfig(llama.dump(), label);
  if (!base.ok()) return base.status();
  c.base = *std::move(base);
  c.base.model_type = "gpt_oss";
  if (c.base.mlp_bias) return ConfigFieldError(label, "mlp_bias", "= true is not a gpt_oss field (the experts carry biases)");
  return absl::OkStatus();
}

// HF's GptOssConfig: layer_types defaults to sliding for even layers, full for odd ones; sliding_window null = none.
absl::Status ParseLayerTypes(const json& root, const std::string& label, GptOssConfig& c) {
  const int64_t layers = c.base.num_hidden_layers;
  c.base.sliding_window_layers.assign(layers, false);
  for (int64_t i = 0; i < layers; ++i) c.base.sliding_window_layers[i] = (i + 1) % 2 != 0;
  auto types = root.find("layer_types");
  if (types != root.end() && !types->is_null()) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != layers) {
      return ConfigFieldError(label, "layer_types", StrCat("= ", types->dump(), " is not a list of ", layers, " layer types"));
    }
    for (int64_t i = 0; i < layers; ++i) {
      const json& type = (*types)[i];
      const std::string name = type.is_string() ? type.get<std::string>() : type.dump();
      if (name != "sliding_attention" && name != "full_attention") {
        return ConfigFieldError(label, StrCat("layer_types[", i, "]"),
                                StrCat("= \"", name, "\" is not sliding_attention or full_attention"));
      }
      c.base.sliding_window_layers[i] = name == "sliding_attention";
    }
  }
  auto window = root.find("sliding_window");
  if (window == root.end() || window->is_null()) {
    for (int64_t i = 0; i < layers; ++i) {
      if (c.base.sliding_window_layers[i]) {
        return ConfigFieldError(label, "sliding_window", StrCat("is null but layer ", i, " is a sliding_attention layer"));
      }
    }
    return absl::OkStatus();
  }
  return ReadPositiveField(root, label, "sliding_window", 0, c.base.max_position_embeddings, &c.base.sliding_window);
}

absl::Status ParseMoe(const json& root, const std::string& label, GptOssConfig& c) {
  const char* experts_key = root.contains("num_local_experts") ? "num_local_experts" : "num_experts";
  if (auto s = ReadPositiveField(root, label, experts_key, 0, kMaxExperts, &c.num_local_experts); !s.ok()) return s;
  if (c.base.num_hidden_layers * c.num_local_experts > kMaxLayerExperts) {
    return ConfigFieldError(label, experts_key, StrCat("= ", c.num_local_experts, " in each of ", c.base.num_hidden_layers,
                                                       " layers is above the limit of ", kMaxLayerExperts, " experts in all"));
  }
  // OpenAI's own config name is experts_per_token; HF's config.json carries both.
  const char* top_k_key = root.contains("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token";
  if (auto s = ReadPositiveField(root, label, top_k_key, 4, kMaxExperts, &c.num_experts_per_tok); !s.ok()) return s;
  if (c.num_experts_per_tok > c.num_local_experts) {
    return ConfigFieldError(label, top_k_key, StrCat("= ", c.num_experts_per_tok, " exceeds num_local_experts = ",
                                                     c.num_local_experts));
  }
  if (root.contains("experts_per_token") && root.contains("num_experts_per_tok") &&
      root["experts_per_token"] != root["num_experts_per_tok"]) {
    return ConfigFieldError(label, "experts_per_token", StrCat("= ", root["experts_per_token"].dump(),
                                                               " differs from num_experts_per_tok = ", c.num_experts_per_tok));
  }
  struct Positive {
    const char* name;
    double* target;
  };
  for (const Positive& p : {Positive{"swiglu_limit", &c.swiglu_limit}, Positive{"swiglu_alpha", &c.swiglu_alpha}}) {
    auto value = ReadNumberOr(root, label, p.name, p.name, *p.target);
    if (!value.ok()) return value.status();
    if (!(*value > 0)) return ConfigFieldError(label, p.name, StrCat("= ", *value, " must be positive"));
    *p.target = *value;
  }
  return absl::OkStatus();
}

// OpenAI's release: {"quant_method": "mxfp4", "modules_to_not_convert": [attention, router, embeddings, lm_head]}.
absl::Status ParseQuantization(const json& root, const std::string& label, GptOssConfig& c) {
  auto quantization = root.find("quantization_config");
  if (quantization == root.end() || quantization->is_null()) return absl::OkStatus();
  const json method = quantization->is_object() && quantization->contains("quant_method") ? (*quantization)["quant_method"]
                                                                                           : json(nullptr);
  // "quark": an HF-quark export (the engine's or Quark's), experts stored per expert; its reader dequantizes them.
  if (method == "quark") return absl::OkStatus();
  if (method != "mxfp4") {
    return ConfigFieldError(label, "quantization_config.quant_method",
                            StrCat("= ", method.dump(), " is not a gpt_oss source read here (only \"mxfp4\" experts, or "
                                   "an HF-quark export)"));
  }
  auto keep = quantization->find("modules_to_not_convert");
  if (keep != quantization->end() && !keep->is_null()) {
    if (!keep->is_array()) {
      return ConfigFieldError(label, "quantization_config.modules_to_not_convert", StrCat("= ", keep->dump(), " is not a list"));
    }
    for (const json& module : *keep) {
      if (module.is_string() && module.get<std::string>().find("experts") != std::string::npos) {
        return ConfigFieldError(label, "quantization_config.modules_to_not_convert",
                                StrCat("names ", module.dump(), ": float experts beside an mxfp4 quant_method are not read"));
      }
    }
  }
  c.mxfp4_experts = true;
  return absl::OkStatus();
}

// What the runtime does not implement, refused by name.
absl::Status RefuseUnimplemented(const json& root, const std::string& label) {
  auto dropout = ReadNumberOr(root, label, "attention_dropout", "attention_dropout", 0);
  if (!dropout.ok()) return dropout.status();
  if (*dropout != 0) return ConfigFieldError(label, "attention_dropout", StrCat("= ", *dropout, " is not supported (only 0)"));
  return absl::OkStatus();
}

}  // namespace

bool IsGptOssModelType(const std::string& model_type) { return model_type == "gpt_oss"; }

absl::StatusOr<GptOssConfig> ParseGptOssConfig(const std::string& json_text, const std::string& label) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return absl::InvalidArgumentError(StrCat(label, ": not a JSON object"));
  auto type = root.find("model_type");
  if (type == root.end() || !type->is_string() || !IsGptOssModelType(type->get<std::string>())) {
    return ConfigFieldError(label, "model_type", StrCat("= ", type == root.end() ? "null" : type->dump(), " is not gpt_oss"));
  }
  if (auto s = RefuseUnimplemented(root, label); !s.ok()) return s;
  if (auto s = NormalizeRopeParameters(root, label); !s.ok()) return s;
  GptOssConfig c;
  if (auto s = ParseBase(root, label, c); !s.ok()) return s;
  if (auto s = ParseLayerTypes(root, label, c); !s.ok()) return s;
  if (auto s = ParseMoe(root, label, c); !s.ok()) return s;
  if (auto s = ParseQuantization(root, label, c); !s.ok()) return s;
  auto yarn = ParseYarnScaling(root, label, "gpt_oss", c.base.max_position_embeddings);
  if (!yarn.ok()) return yarn.status();
  c.yarn = *yarn;
  return c;
}

std::string GptOssConfigToJson(const GptOssConfig& c) {
  json root = json::parse(ModelConfigToJson(c.base));
  root["architectures"] = {"GptOssForCausalLM"};
  root["model_type"] = "gpt_oss";
  for (const char* key : {"mlp_bias", "rope_scaling", "use_sliding_window", "max_window_layers"}) root.erase(key);
  root["attention_bias"] = c.base.attention_bias;
  root["head_dim"] = c.base.head_dim;
  root["sliding_window"] = c.base.sliding_window > 0 ? json(c.base.sliding_window) : json(nullptr);
  json types = json::array();
  for (int64_t i = 0; i < c.base.num_hidden_layers; ++i) {
    types.push_back(c.LayerWindow(i) > 0 ? "sliding_attention" : "full_attention");
  }
  root["layer_types"] = types;
  root["num_local_experts"] = c.num_local_experts;
  root["num_experts_per_tok"] = c.num_experts_per_tok;
  root["experts_per_token"] = c.num_experts_per_tok;
  root["swiglu_limit"] = c.swiglu_limit;
  root["swiglu_alpha"] = c.swiglu_alpha;
  root["attention_dropout"] = 0.0;
  if (c.yarn) root["rope_scaling"] = YarnScalingToJson(*c.yarn, "rope_type");
  if (c.mxfp4_experts) {
    root["quantization_config"] = {{"quant_method", "mxfp4"},
                                   {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                               "model.embed_tokens", "lm_head"}}};
  }
  return root.dump(2) + "\n";
}

}  // namespace quark::checkpoint
