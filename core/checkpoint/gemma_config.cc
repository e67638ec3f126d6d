#include "core/checkpoint/gemma_config.h"

#include <cstdint>

#include "core/base/strings.h"

namespace quark::checkpoint {
namespace {

using nlohmann::json;

absl::Status GemmaFieldError(const std::string& label, const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(quark::StrCat(label, ": field \"", field, "\" ", what));
}

// A float field: `fallback` when absent; 0 (= none) when null, which is how Gemma 3 configs switch soft-capping off.
double NullableDouble(const json& root, const std::string& field, double fallback) {
  auto it = root.find(field);
  if (it == root.end()) return fallback;
  return it->is_number() ? it->get<double>() : 0.0;
}

// Defaults of HF's Gemma2Config and Gemma3TextConfig for the fields a saved config.json may leave out.
struct GemmaDefaults {
  double rope_theta;
  double rope_local_base_freq;  // 0: the global base (Gemma 2 has one RoPE for every layer)
  double attn_softcap;
  double final_softcap;
};

GemmaDefaults DefaultsFor(const std::string& model_type) {
  if (model_type == "gemma2") return {10000.0, 0.0, 50.0, 30.0};
  return {1000000.0, 10000.0, 0.0, 0.0};
}

// Which layers slide. `layer_types` when present (transformers >= 4.53 writes it); else Gemma 2's rule
// (Gemma2Attention: sliding when layer_idx % 2 == 0, i.e. layer_types "sliding" for bool((i + 1) % 2)) or
// Gemma 3's (Gemma3TextConfig: sliding unless (i + 1) % sliding_window_pattern == 0, pattern 6: every 6th global).
absl::Status ParseGemmaLayerTypes(const json& root, const std::string& label, ModelConfig& config) {
  const int64_t layers = config.num_hidden_layers;
  config.sliding_window_layers.assign(layers, true);
  auto types = root.find("layer_types");
  if (types != root.end() && !types->is_null()) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != layers) {
      return GemmaFieldError(label, "layer_types", quark::StrCat("= ", types->dump(), " is not a list of ", layers, " layer types"));
    }
    for (int64_t i = 0; i < layers; ++i) {
      const json& type = (*types)[i];
      const std::string name = type.is_string() ? type.get<std::string>() : type.dump();
      if (name != "sliding_attention" && name != "full_attention") {
        return GemmaFieldError(label, quark::StrCat("layer_types[", i, "]"),
                               quark::StrCat("= \"", name, "\" is not sliding_attention or full_attention"));
      }
      config.sliding_window_layers[i] = name == "sliding_attention";
    }
    return absl::OkStatus();
  }
  int64_t pattern = 2;
  if (config.model_type == "gemma3_text") {
    auto it = root.find("sliding_window_pattern");
    pattern = it != root.end() && it->is_number_integer() ? it->get<int64_t>() : 6;
    if (pattern <= 0) return GemmaFieldError(label, "sliding_window_pattern", quark::StrCat("= ", pattern, " must be positive"));
  }
  for (int64_t i = 0; i < layers; ++i) config.sliding_window_layers[i] = (i + 1) % pattern != 0;
  return absl::OkStatus();
}

absl::Status ParseGemmaWindow(const json& root, const std::string& label, ModelConfig& config) {
  auto it = root.find("sliding_window");
  if (it != root.end() && it->is_null()) return absl::OkStatus();  // no window at all
  int64_t window = 4096;  // both configs' default
  if (it != root.end()) {
    if (!it->is_number_integer()) return GemmaFieldError(label, "sliding_window", quark::StrCat("= ", it->dump(), " is not an integer"));
    window = it->get<int64_t>();
  }
  if (window <= 0) return GemmaFieldError(label, "sliding_window", quark::StrCat("= ", window, " must be positive (or null)"));
  config.sliding_window = window;
  return ParseGemmaLayerTypes(root, label, config);
}

// transformers >= 5 saves RoPE as `rope_parameters`: flat for Gemma 2 ({"rope_type", "rope_theta", ...}), per layer
// type for Gemma 3 ({"full_attention": {...}, "sliding_attention": {...}}). Read into rope_theta /
// rope_local_base_freq / rope_scaling; a sliding-layer rope_type other than "default" is refused (HF's own Gemma 3
// configs never scale the local RoPE).
absl::Status ParseRopeParameters(const json& root, const std::string& label, ModelConfig& config) {
  auto it = root.find("rope_parameters");
  if (it == root.end() || !it->is_object()) return absl::OkStatus();
  const auto read = [&](const json& p, const std::string& field, double* theta, bool scaled) -> absl::Status {
    if (!p.is_object()) return GemmaFieldError(label, field, quark::StrCat("= ", p.dump(), " is not an object"));
    *theta = NullableDouble(p, "rope_theta", *theta);
    const std::string type = p.value("rope_type", std::string("default"));
    if (type == "default") return absl::OkStatus();
    if (scaled && type == "linear" && p.contains("factor") && p["factor"].is_number() && p["factor"].get<double>() > 0) {
      config.rope_scaling = RopeScaling{"linear", p["factor"].get<double>()};
      return absl::OkStatus();
    }
    return GemmaFieldError(label, field + ".rope_type", quark::StrCat("= \"", type, "\" is not supported (default, or linear on global layers)"));
  };
  if (!it->contains("full_attention") && !it->contains("sliding_attention")) {
    return read(*it, "rope_parameters", &config.rope_theta, /*scaled=*/true);
  }
  if (it->contains("full_attention")) {
    if (auto s = read((*it)["full_attention"], "rope_parameters.full_attention", &config.rope_theta, true); !s.ok()) return s;
  }
  if (it->contains("sliding_attention")) {
    return read((*it)["sliding_attention"], "rope_parameters.sliding_attention", &config.rope_local_base_freq, false);
  }
  return absl::OkStatus();
}

}  // namespace

bool IsGemmaModelType(const std::string& model_type) { return model_type == "gemma2" || model_type == "gemma3_text"; }

absl::Status RefuseOtherGemma(const std::string& model_type, const std::string& label) {
  if (model_type == "gemma3") {
    return GemmaFieldError(label, "model_type", "= \"gemma3\" (Gemma3ForConditionalGeneration, multimodal) is not supported: "
                           "its text weights live under language_model.*; a text-only gemma3_text checkpoint is");
  }
  if (model_type == "gemma") {
    return GemmaFieldError(label, "model_type", "= \"gemma\" (Gemma 1) is not supported (gemma2 and gemma3_text are)");
  }
  return absl::OkStatus();
}

absl::Status ParseGemmaFields(const json& root, const std::string& label, ModelConfig& config) {
  const GemmaDefaults defaults = DefaultsFor(config.model_type);
  config.family = ArchFamily::kGemma;
  // HF's Gemma models read hidden_activation (hidden_act is a legacy duplicate in Gemma 2 configs).
  auto act = root.find("hidden_activation");
  if (act == root.end() || act->is_null()) act = root.find("hidden_act");
  config.hidden_act = act != root.end() && act->is_string() ? act->get<std::string>() : "gelu_pytorch_tanh";
  if (config.hidden_act != "gelu_pytorch_tanh") {
    return GemmaFieldError(label, "hidden_activation", quark::StrCat("= \"", config.hidden_act, "\" is not supported (gelu_pytorch_tanh)"));
  }
  config.rms_norm_eps = NullableDouble(root, "rms_norm_eps", 1e-6);
  config.rope_theta = NullableDouble(root, "rope_theta", defaults.rope_theta);
  config.rope_local_base_freq = NullableDouble(root, "rope_local_base_freq", defaults.rope_local_base_freq);
  if (auto status = ParseRopeParameters(root, label, config); !status.ok()) return status;
  config.query_pre_attn_scalar = NullableDouble(root, "query_pre_attn_scalar", 256.0);
  if (config.query_pre_attn_scalar <= 0) {
    return GemmaFieldError(label, "query_pre_attn_scalar", quark::StrCat("= ", config.query_pre_attn_scalar, " must be positive"));
  }
  config.attn_logit_softcapping = NullableDouble(root, "attn_logit_softcapping", defaults.attn_softcap);
  config.final_logit_softcapping = NullableDouble(root, "final_logit_softcapping", defaults.final_softcap);
  if (config.attn_logit_softcapping < 0 || config.final_logit_softcapping < 0) {
    return GemmaFieldError(label, "attn_logit_softcapping", "and final_logit_softcapping must not be negative");
  }
  // Gemma ties lm_head to the embedding (PretrainedConfig's default True; no Gemma checkpoint ships an lm_head).
  auto tie = root.find("tie_word_embeddings");
  config.tie_word_embeddings = tie == root.end() || !tie->is_boolean() || tie->get<bool>();
  if (!config.tie_word_embeddings) return GemmaFieldError(label, "tie_word_embeddings", "= false is not supported for Gemma");
  auto bias = root.find("attention_bias");
  if (bias != root.end() && bias->is_boolean() && bias->get<bool>()) {
    return GemmaFieldError(label, "attention_bias", "= true is not supported for Gemma");
  }
  config.attention_bias = config.o_proj_bias = config.mlp_bias = false;
  return ParseGemmaWindow(root, label, config);
}

void WriteGemmaFields(const ModelConfig& c, json& root) {
  const bool gemma3 = c.model_type == "gemma3_text";
  root["architectures"] = {gemma3 ? "Gemma3ForCausalLM" : "Gemma2ForCausalLM"};
  root["intermediate_size"] = c.intermediate_size;
  root["num_key_value_heads"] = c.num_key_value_heads;
  root["head_dim"] = c.head_dim;
  root["rms_norm_eps"] = c.rms_norm_eps;
  root["rope_theta"] = c.rope_theta;
  if (gemma3) root["rope_local_base_freq"] = c.rope_local_base_freq;
  root["hidden_activation"] = c.hidden_act;
  root["hidden_act"] = c.hidden_act;
  root["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
  root["attn_logit_softcapping"] = c.attn_logit_softcapping > 0 ? json(c.attn_logit_softcapping) : json(nullptr);
  root["final_logit_softcapping"] = c.final_logit_softcapping > 0 ? json(c.final_logit_softcapping) : json(nullptr);
  root["attention_bias"] = false;
  root["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  if (c.sliding_window > 0) {
    json types = json::array();
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      types.push_back(LayerAttentionWindow(c, i) > 0 ? "sliding_attention" : "full_attention");
    }
    root["layer_types"] = types;
  }
  root["rope_scaling"] = c.rope_scaling ? json{{"rope_type", c.rope_scaling->rope_type}, {"factor", c.rope_scaling->factor}}
                                        : json(nullptr);
}

}  // namespace quark::checkpoint
