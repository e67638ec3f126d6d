#include "core/checkpoint/llama4_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/base/strings.h"
#include "core/checkpoint/config_fields.h"
#include "core/checkpoint/config_limits.h"

namespace quark::checkpoint {
namespace {

using nlohmann::json;

absl::Status ReadBool(const json& root, const std::string& label, const std::string& field, bool* out) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return ConfigFieldError(label, field, quark::StrCat("= ", it->dump(), " is not a boolean"));
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadNumber(const json& root, const std::string& label, const std::string& field, double* out) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return ConfigFieldError(label, field, quark::StrCat("= ", it->dump(), " is not a number"));
  *out = it->get<double>();
  return absl::OkStatus();
}

// HF's newer rope_parameters ({"rope_type", "rope_theta", ...}) as the older rope_theta / rope_scaling the Llama
// parser reads; "default" is no scaling.
absl::Status NormalizeRope(json& root, const std::string& label) {
  auto it = root.find("rope_parameters");
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return ConfigFieldError(label, "rope_parameters", quark::StrCat("= ", it->dump(), " is not an object"));
  json params = *it;
  root.erase("rope_parameters");
  if (params.contains("rope_theta")) root["rope_theta"] = params["rope_theta"];
  const auto type = params.find("rope_type");
  if (type == params.end() || (type->is_string() && type->get<std::string>() == "default")) return absl::OkStatus();
  if (!type->is_string() || (type->get<std::string>() != "llama3" && type->get<std::string>() != "linear")) {
    return ConfigFieldError(label, "rope_parameters.rope_type",
                            quark::StrCat("= ", type->dump(), " is not supported (supported: default, llama3, linear)"));
  }
  params.erase("rope_theta");
  root["rope_scaling"] = params;
  return absl::OkStatus();
}

absl::Status ParseBase(const json& root, const std::string& label, Llama4Config& c) {
  json llama = root;
  llama["model_type"] = "llama";
  llama.erase("sliding_window");
  if (auto s = NormalizeRope(llama, label); !s.ok()) return s;
  auto base = ParseModelConfig(llama.dump(), label);
  if (!base.ok()) return base.status();
  c.base = *std::move(base);
  c.base.model_type = "llama4_text";
  c.base.family = ArchFamily::kLlama4;
  if (c.base.hidden_act != "silu") {
    return ConfigFieldError(label, "hidden_act", quark::StrCat("= \"", c.base.hidden_act, "\" is not supported for llama4_text (only silu)"));
  }
  if (c.base.mlp_bias) return ConfigFieldError(label, "mlp_bias", "= true is not supported for llama4_text");
  c.base.o_proj_bias = c.base.attention_bias;  // HF's Llama4TextAttention: o_proj has the bias too
  if (c.base.head_dim % 2 != 0) {
    return ConfigFieldError(label, "head_dim", quark::StrCat("= ", c.base.head_dim, " must be even for RoPE"));
  }
  return absl::OkStatus();
}

// A per-layer list of 0/1 (no_rope_layers), `fallback` when absent, null or empty (HF: `if self.no_rope_layers`).
absl::Status ReadLayerFlags(const json& root, const std::string& label, const std::string& field, int64_t layers,
                            std::vector<bool> fallback, std::vector<bool>* out) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null() || (it->is_array() && it->empty())) {
    *out = std::move(fallback);
    return absl::OkStatus();
  }
  if (!it->is_array() || static_cast<int64_t>(it->size()) != layers) {
    return ConfigFieldError(label, field, quark::StrCat("= ", it->dump(), " is not a list of ", layers, " entries"));
  }
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_number_integer() || (v.get<int64_t>() != 0 && v.get<int64_t>() != 1)) {
      return ConfigFieldError(label, quark::StrCat(field, "[", i, "]"), quark::StrCat("= ", v.dump(), " is not 0 or 1"));
    }
    out->push_back(v.get<int64_t>() == 1);
  }
  return absl::OkStatus();
}

absl::Status ParseMoeLayers(const json& root, const std::string& label, Llama4Config& c) {
  const int64_t layers = c.base.num_hidden_layers;
  int64_t step = 1;
  if (auto s = ReadPositiveField(root, label, "interleave_moe_layer_step", 1, kMaxLayers, &step); !s.ok()) return s;
  c.moe_layers.assign(layers, false);
  auto it = root.find("moe_layers");
  if (it == root.end() || it->is_null()) {
    for (int64_t i = step - 1; i < layers; i += step) c.moe_layers[i] = true;  // HF's range(step - 1, layers, step)
    return absl::OkStatus();
  }
  if (!it->is_array()) return ConfigFieldError(label, "moe_layers", quark::StrCat("= ", it->dump(), " is not a list"));
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= layers) {
      return ConfigFieldError(label, quark::StrCat("moe_layers[", i, "]"),
                              quark::StrCat("= ", v.dump(), " is not a layer index in [0, ", layers, ")"));
    }
    c.moe_layers[v.get<int64_t>()] = true;
  }
  return absl::OkStatus();
}

absl::Status ParseExperts(const json& root, const std::string& label, Llama4Config& c) {
  if (auto s = ReadPositiveField(root, label, "intermediate_size_mlp", 0, kMaxIntermediateSize, &c.intermediate_size_mlp);
      !s.ok()) {
    return s;
  }
  if (auto s = ReadPositiveField(root, label, "num_local_experts", 0, kMaxExperts, &c.num_local_experts); !s.ok()) return s;
  if (c.base.num_hidden_layers * c.num_local_experts > kMaxLayerExperts) {
    return ConfigFieldError(label, "num_local_experts", quark::StrCat("= ", c.num_local_experts, " in each of ",
                            c.base.num_hidden_layers, " layers is above the limit of ", kMaxLayerExperts, " experts in all"));
  }
  if (auto s = ReadPositiveField(root, label, "num_experts_per_tok", 1, kMaxExperts, &c.num_experts_per_tok); !s.ok()) return s;
  if (c.num_experts_per_tok > c.num_local_experts) {
    return ConfigFieldError(label, "num_experts_per_tok", quark::StrCat("= ", c.num_experts_per_tok,
                            " exceeds num_local_experts = ", c.num_local_experts));
  }
  return ParseMoeLayers(root, label, c);
}

absl::Status ParseLayerTypes(const json& root, const std::string& label, Llama4Config& c) {
  const int64_t layers = c.base.num_hidden_layers;
  int64_t interval = 4;
  if (auto s = ReadPositiveField(root, label, "no_rope_layer_interval", 4, kMaxLayers, &interval); !s.ok()) return s;
  std::vector<bool> fallback;
  for (int64_t i = 0; i < layers; ++i) fallback.push_back((i + 1) % interval != 0);
  if (auto s = ReadLayerFlags(root, label, "no_rope_layers", layers, fallback, &c.rope_layers); !s.ok()) return s;
  c.chunked_layers = c.rope_layers;  // HF: chunked_attention where no_rope_layers[i], else full_attention
  auto it = root.find("layer_types");
  if (it != root.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int64_t>(it->size()) != layers) {
      return ConfigFieldError(label, "layer_types", quark::StrCat("= ", it->dump(), " is not a list of ", layers, " entries"));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& v = (*it)[i];
      if (!v.is_string() || (v.get<std::string>() != "chunked_attention" && v.get<std::string>() != "full_attention")) {
        return ConfigFieldError(label, quark::StrCat("layer_types[", i, "]"),
                                quark::StrCat("= ", v.dump(), " is not supported (chunked_attention, full_attention)"));
      }
      c.chunked_layers[i] = v.get<std::string>() == "chunked_attention";
    }
  }
  auto chunk = root.find("attention_chunk_size");
  if (chunk != root.end() && !chunk->is_null()) {
    if (auto s = ReadPositiveField(root, label, "attention_chunk_size", 0, kMaxPositions, &c.attention_chunk_size); !s.ok()) {
      return s;
    }
  } else if (std::find(c.chunked_layers.begin(), c.chunked_layers.end(), true) != c.chunked_layers.end()) {
    // HF's create_chunked_causal_mask raises without a chunk size.
    return ConfigFieldError(label, "attention_chunk_size", "is null but layer_types names chunked_attention layers");
  }
  return absl::OkStatus();
}

absl::Status ParseAttentionDetails(const json& root, const std::string& label, Llama4Config& c) {
  if (auto s = ReadBool(root, label, "use_qk_norm", &c.use_qk_norm); !s.ok()) return s;
  // Scout's released config.json says "attn_temperature_tuning": 4; HF's attention only tests it for truth.
  auto tuning = root.find("attn_temperature_tuning");
  if (tuning != root.end() && tuning->is_number_integer() && tuning->get<int64_t>() >= 0) {
    c.attn_temperature_tuning = tuning->get<int64_t>() != 0;
  } else if (auto s = ReadBool(root, label, "attn_temperature_tuning", &c.attn_temperature_tuning); !s.ok()) {
    return s;
  }
  if (auto s = ReadNumber(root, label, "floor_scale", &c.floor_scale); !s.ok()) return s;
  if (auto s = ReadNumber(root, label, "attn_scale", &c.attn_scale); !s.ok()) return s;
  if (!(c.floor_scale > 0)) return ConfigFieldError(label, "floor_scale", quark::StrCat("= ", c.floor_scale, " must be positive"));
  double dropout = 0;
  if (auto s = ReadNumber(root, label, "attention_dropout", &dropout); !s.ok()) return s;
  if (dropout < 0 || dropout >= 1) {
    return ConfigFieldError(label, "attention_dropout", quark::StrCat("= ", dropout, " is not in [0, 1)"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsLlama4ModelType(const std::string& model_type) { return model_type == "llama4_text"; }

absl::StatusOr<Llama4Config> ParseLlama4Config(const std::string& json_text, const std::string& label) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return absl::InvalidArgumentError(quark::StrCat(label, ": not a JSON object"));
  auto type = root.find("model_type");
  if (type != root.end() && type->is_string() && type->get<std::string>() == "llama4") {
    return ConfigFieldError(label, "model_type", "= \"llama4\" (the multimodal model) is not supported: its text_config "
                            "is read as model_type llama4_text, with the language_model.* prefix removed from its tensors");
  }
  if (type == root.end() || !type->is_string() || !IsLlama4ModelType(type->get<std::string>())) {
    return ConfigFieldError(label, "model_type", quark::StrCat("= ", type == root.end() ? "null" : type->dump(),
                                                               " is not llama4_text"));
  }
  Llama4Config c;
  if (auto s = ParseBase(root, label, c); !s.ok()) return s;
  if (auto s = ParseExperts(root, label, c); !s.ok()) return s;
  if (auto s = ParseLayerTypes(root, label, c); !s.ok()) return s;
  if (auto s = ParseAttentionDetails(root, label, c); !s.ok()) return s;
  return c;
}

std::string Llama4ConfigToJson(const Llama4Config& c) {
  json root = json::parse(ModelConfigToJson(c.base));
  root["architectures"] = {"Llama4ForCausalLM"};
  root["model_type"] = "llama4_text";
  root.erase("mlp_bias");
  root.erase("o_proj_bias");
  root["intermediate_size_mlp"] = c.intermediate_size_mlp;
  root["num_local_experts"] = c.num_local_experts;
  root["num_experts_per_tok"] = c.num_experts_per_tok;
  json moe = json::array(), no_rope = json::array(), types = json::array();
  for (size_t i = 0; i < c.moe_layers.size(); ++i) {
    if (c.moe_layers[i]) moe.push_back(i);
    no_rope.push_back(c.rope_layers[i] ? 1 : 0);
    types.push_back(c.chunked_layers[i] ? "chunked_attention" : "full_attention");
  }
  root["moe_layers"] = moe;
  root["no_rope_layers"] = no_rope;
  root["layer_types"] = types;
  root["attention_chunk_size"] = c.attention_chunk_size > 0 ? json(c.attention_chunk_size) : json(nullptr);
  root["use_qk_norm"] = c.use_qk_norm;
  root["attn_temperature_tuning"] = c.attn_temperature_tuning;
  root["floor_scale"] = c.floor_scale;
  root["attn_scale"] = c.attn_scale;
  root["hidden_act"] = "silu";
  return root.dump(2) + "\n";
}

}  // namespace quark::checkpoint
