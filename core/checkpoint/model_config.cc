#include "core/checkpoint/model_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/base/strings.h"
#include "core/checkpoint/config_limits.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/checkpoint/llama4_config.h"
#include "core/checkpoint/moe_config.h"
#include "core/checkpoint/gemma_config.h"

namespace quark::checkpoint {
namespace {

using nlohmann::json;

absl::Status FieldError(const std::string& label, const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(quark::StrCat(label, ": field \"", field, "\" ", what));
}

// Reads an integer field; `fallback` when absent (nullopt = required).
absl::StatusOr<int64_t> IntField(const json& root, const std::string& label, const std::string& field,
                                 std::optional<int64_t> fallback) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) {
    if (fallback) return *fallback;
    return FieldError(label, field, "is missing");
  }
  if (!it->is_number_integer()) return FieldError(label, field, quark::StrCat("= ", it->dump(), " is not an integer"));
  return it->get<int64_t>();
}

double DoubleField(const json& root, const std::string& field, double fallback) {
  auto it = root.find(field);
  return it != root.end() && it->is_number() ? it->get<double>() : fallback;
}

bool BoolField(const json& root, const std::string& field, bool fallback) {
  auto it = root.find(field);
  return it != root.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string StringField(const json& root, const std::string& field, const std::string& fallback) {
  auto it = root.find(field);
  return it != root.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// eos_token_id may be a list (Llama 3): the first entry is the one that ends a sequence here.
int64_t TokenIdField(const json& root, const std::string& field) {
  auto it = root.find(field);
  if (it == root.end()) return -1;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) return (*it)[0].get<int64_t>();
  return -1;
}

absl::Status ParseRopeScaling(const json& root, const std::string& label, ModelConfig& config) {
  auto it = root.find("rope_scaling");
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return FieldError(label, "rope_scaling", quark::StrCat("= ", it->dump(), " is not an object"));
  RopeScaling scaling;
  scaling.rope_type = StringField(*it, "rope_type", StringField(*it, "type", ""));
  if (scaling.rope_type != "llama3" && scaling.rope_type != "linear") {
    return FieldError(label, "rope_scaling.rope_type",
                      quark::StrCat("= \"", scaling.rope_type, "\" is not supported (supported: llama3, linear)"));
  }
  scaling.factor = DoubleField(*it, "factor", 1.0);
  scaling.low_freq_factor = DoubleField(*it, "low_freq_factor", 1.0);
  scaling.high_freq_factor = DoubleField(*it, "high_freq_factor", 4.0);
  auto original = IntField(*it, label, "original_max_position_embeddings", 8192);
  if (!original.ok()) return original.status();
  scaling.original_max_position_embeddings = *original;
  // high == low is Llama 4 Scout's (1.0, 1.0): no blended band, each frequency either kept or divided by factor.
  if (scaling.factor <= 0 || scaling.high_freq_factor < scaling.low_freq_factor) {
    return FieldError(label, "rope_scaling", quark::StrCat("= ", it->dump(), " has a non-positive factor or high < low freq factor"));
  }
  config.rope_scaling = scaling;
  return absl::OkStatus();
}

// HF's Qwen2Config default: layers below this index attend to everything even with use_sliding_window.
constexpr int64_t kQwen2DefaultMaxWindowLayers = 28;

// Which layers of a windowed model use the window. Mistral: all. Qwen2: `layer_types` when given
// ("sliding_attention" / "full_attention" per layer), else layers >= max_window_layers (HF's Qwen2Config).
absl::Status ParseSlidingWindowLayers(const json& root, const std::string& label, ModelConfig& config) {
  if (config.model_type != "qwen2" && config.model_type != "qwen3") return absl::OkStatus();
  const int64_t layers = config.num_hidden_layers;
  config.sliding_window_layers.assign(layers, true);
  auto types = root.find("layer_types");
  if (types != root.end() && !types->is_null()) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != layers) {
      return FieldError(label, "layer_types", quark::StrCat("= ", types->dump(), " is not a list of ", layers, " layer types"));
    }
    for (int64_t i = 0; i < layers; ++i) {
      const json& type = (*types)[i];
      const std::string name = type.is_string() ? type.get<std::string>() : type.dump();
      if (name != "sliding_attention" && name != "full_attention") {
        return FieldError(label, quark::StrCat("layer_types[", i, "]"),
                          quark::StrCat("= \"", name, "\" is not sliding_attention or full_attention"));
      }
      config.sliding_window_layers[i] = name == "sliding_attention";
    }
    return absl::OkStatus();
  }
  auto first = IntField(root, label, "max_window_layers", kQwen2DefaultMaxWindowLayers);
  if (!first.ok()) return first.status();
  for (int64_t i = 0; i < layers; ++i) config.sliding_window_layers[i] = i >= *first;
  return absl::OkStatus();
}

// `sliding_window`: an int, or null for none. Mistral always honours it; Qwen2 only with use_sliding_window
// (HF sets it to None otherwise, so its value is then ignored, not validated); Llama has no window. An absent
// key means no window here (HF's MistralConfig would default to 4096, but every saved Mistral config.json
// carries the key, null since v0.2).
absl::Status ParseSlidingWindow(const json& root, const std::string& label, ModelConfig& config) {
  // Phi-3 ships a window (2047 in Phi-3-mini-4k) that HF applies to every layer, as Mistral's.
  const bool qwen = config.model_type == "qwen2" || config.model_type == "qwen3";
  const bool used = config.model_type == "mistral" || config.model_type == "phi3" ||
                    (qwen && BoolField(root, "use_sliding_window", false));
  if (!used) return absl::OkStatus();
  auto window = IntField(root, label, "sliding_window", 0);
  if (!window.ok()) return window.status();
  if (!root.contains("sliding_window") || root["sliding_window"].is_null()) return absl::OkStatus();
  if (*window <= 0) {
    return FieldError(label, "sliding_window", quark::StrCat("= ", *window, " must be positive (or null for no window)"));
  }
  config.sliding_window = *window;
  return ParseSlidingWindowLayers(root, label, config);
}

absl::Status ParseSizes(const json& root, const std::string& label, ModelConfig& config) {
  const bool opt = config.family == ArchFamily::kOpt;
  struct Field {
    const char* name;
    int64_t* target;
    std::optional<int64_t> fallback;
  };
  const Field fields[] = {
      {"hidden_size", &config.hidden_size, std::nullopt},
      {opt ? "ffn_dim" : "intermediate_size", &config.intermediate_size, std::nullopt},
      {"num_hidden_layers", &config.num_hidden_layers, std::nullopt},
      {"num_attention_heads", &config.num_attention_heads, std::nullopt},
      {"vocab_size", &config.vocab_size, std::nullopt},
      {"max_position_embeddings", &config.max_position_embeddings, opt ? std::optional<int64_t>(2048) : 2048},
  };
  for (const Field& f : fields) {
    auto value = IntField(root, label, f.name, f.fallback);
    if (!value.ok()) return value.status();
    if (*value <= 0) return FieldError(label, f.name, quark::StrCat("= ", *value, " must be positive"));
    if (auto limit = CheckSizeLimit(label, f.name, *value); !limit.ok()) return limit;
    *f.target = *value;
  }
  auto kv = IntField(root, label, "num_key_value_heads", config.num_attention_heads);
  if (!kv.ok()) return kv.status();
  config.num_key_value_heads = opt ? config.num_attention_heads : *kv;
  if (auto limit = CheckSizeLimit(label, "num_key_value_heads", *kv); !limit.ok()) return limit;
  if (config.num_key_value_heads <= 0 || config.num_attention_heads % config.num_key_value_heads != 0) {
    return FieldError(label, "num_key_value_heads", quark::StrCat("= ", config.num_key_value_heads,
                      " does not divide num_attention_heads = ", config.num_attention_heads));
  }
  auto head_dim = IntField(root, label, "head_dim", 0);
  if (!head_dim.ok()) return head_dim.status();
  if (auto limit = CheckSizeLimit(label, "head_dim", *head_dim); !limit.ok()) return limit;
  if (*head_dim <= 0 && config.hidden_size % config.num_attention_heads != 0) {
    return FieldError(label, "hidden_size", quark::StrCat("= ", config.hidden_size, " is not divisible by num_attention_heads = ",
                      config.num_attention_heads));
  }
  config.head_dim = *head_dim > 0 ? *head_dim : config.hidden_size / config.num_attention_heads;
  if (config.head_dim % 2 != 0 && !opt) return FieldError(label, "head_dim", quark::StrCat("= ", config.head_dim, " must be even for RoPE"));
  return absl::OkStatus();
}

absl::Status ParseOptFields(const json& root, const std::string& label, ModelConfig& config) {
  auto proj = IntField(root, label, "word_embed_proj_dim", config.hidden_size);
  if (!proj.ok()) return proj.status();
  if (*proj <= 0) return FieldError(label, "word_embed_proj_dim", quark::StrCat("= ", *proj, " must be positive"));
  if (auto limit = CheckSizeLimit(label, "word_embed_proj_dim", *proj); !limit.ok()) return limit;
  config.word_embed_proj_dim = *proj;
  config.hidden_act = StringField(root, "activation_function", "relu");
  config.do_layer_norm_before = BoolField(root, "do_layer_norm_before", true);
  config.enable_bias = BoolField(root, "enable_bias", true);
  config.layer_norm_elementwise_affine = BoolField(root, "layer_norm_elementwise_affine", true);
  config.attention_bias = config.o_proj_bias = config.mlp_bias = config.enable_bias;
  config.tie_word_embeddings = BoolField(root, "tie_word_embeddings", true);
  return absl::OkStatus();
}

// What of Phi-3's config the runtime cannot compute: LongRoPE ("longrope", or "su" in the first Phi-3-128k
// releases) and a partial rotary factor other than 1 (Phi-3's own checkpoints rotate whole heads). Phi-3 has no
// attention or MLP biases.
absl::Status CheckPhi3Fields(const json& root, const std::string& label, ModelConfig& config) {
  auto scaling = root.find("rope_scaling");
  if (scaling != root.end() && !scaling->is_null()) {
    const std::string type = scaling->is_object() ? StringField(*scaling, "type", StringField(*scaling, "rope_type", "")) : scaling->dump();
    return FieldError(label, "rope_scaling.type", quark::StrCat("= \"", type, "\" is not supported for phi3 (only a null "
                      "rope_scaling: Phi-3 4k/8k; LongRoPE checkpoints such as Phi-3-128k and Phi-3.5 are not)"));
  }
  const double partial = DoubleField(root, "partial_rotary_factor", 1.0);
  if (partial != 1.0) {
    return FieldError(label, "partial_rotary_factor", quark::StrCat("= ", partial, " is not supported for phi3 (only 1)"));
  }
  config.attention_bias = config.o_proj_bias = config.mlp_bias = false;
  return absl::OkStatus();
}

void WriteSlidingWindow(const ModelConfig& c, json& root) {
  const json window = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  if (c.model_type == "mistral" || c.model_type == "phi3") root["sliding_window"] = window;
  if (c.model_type != "qwen2" && c.model_type != "qwen3") return;
  root["use_sliding_window"] = c.sliding_window > 0;
  root["sliding_window"] = window;
  if (c.sliding_window <= 0) return;
  json types = json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    types.push_back(LayerAttentionWindow(c, i) > 0 ? "sliding_attention" : "full_attention");
  }
  root["layer_types"] = types;
}

}  // namespace

int64_t LayerAttentionWindow(const ModelConfig& config, int64_t layer) {
  if (config.sliding_window <= 0 || config.sliding_window_layers.empty()) return config.sliding_window;
  if (layer < 0 || layer >= static_cast<int64_t>(config.sliding_window_layers.size())) return 0;
  return config.sliding_window_layers[layer] ? config.sliding_window : 0;
}

const char* SupportedModelTypes() { return "llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, opt, mixtral, qwen2_moe, qwen3_moe, deepseek_v3, llama4_text, gpt_oss"; }

namespace {
// deepseek_v3 (deepseek_config.h): the shared fields from its base, the routed experts' sizes, the whole config kept.
absl::StatusOr<ModelConfig> ParseDeepseekModel(const std::string& json_text, const std::string& label) {
  auto deepseek = ParseDeepseekConfig(json_text, label);
  if (!deepseek.ok()) return deepseek.status();
  ModelConfig config = deepseek->base;
  config.family = ArchFamily::kDeepseek;
  config.num_experts = deepseek->n_routed_experts;
  config.num_experts_per_tok = deepseek->num_experts_per_tok;
  config.moe_intermediate_size = deepseek->moe_intermediate_size;
  config.norm_topk_prob = deepseek->norm_topk_prob;
  config.deepseek = std::make_shared<const DeepseekConfig>(*std::move(deepseek));
  return config;
}
// A family parsed apart whose experts are intermediate_size wide and whose top-k weights are not renormalized
// (llama4_text: sigmoid of each; gpt_oss: softmax over the k): its base fields, its family and its experts' sizes.
ModelConfig WithExperts(const ModelConfig& base, ArchFamily family, int64_t experts, int64_t top_k) {
  ModelConfig config = base;
  config.family = family;
  config.num_experts = experts;
  config.num_experts_per_tok = top_k;
  config.moe_intermediate_size = base.intermediate_size;
  config.norm_topk_prob = false;
  return config;
}
// llama4_text (llama4_config.h): likewise; its experts (and the shared expert) are intermediate_size wide.
absl::StatusOr<ModelConfig> ParseLlama4Model(const std::string& json_text, const std::string& label) {
  auto llama4 = ParseLlama4Config(json_text, label);
  if (!llama4.ok()) return llama4.status();
  ModelConfig config = WithExperts(llama4->base, ArchFamily::kLlama4, llama4->num_local_experts, llama4->num_experts_per_tok);
  config.llama4 = std::make_shared<const Llama4Config>(*std::move(llama4));
  return config;
}
// gpt_oss (gpt_oss_config.h): likewise.
absl::StatusOr<ModelConfig> ParseGptOssModel(const std::string& json_text, const std::string& label) {
  auto gpt_oss = ParseGptOssConfig(json_text, label);
  if (!gpt_oss.ok()) return gpt_oss.status();
  ModelConfig config = WithExperts(gpt_oss->base, ArchFamily::kGptOss, gpt_oss->num_local_experts, gpt_oss->num_experts_per_tok);
  config.gpt_oss = std::make_shared<const GptOssConfig>(*std::move(gpt_oss));
  return config;
}
}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& label) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return absl::InvalidArgumentError(quark::StrCat(label, ": not a JSON object"));
  ModelConfig config;
  config.model_type = StringField(root, "model_type", "");
  if (IsDeepseekModelType(config.model_type)) return ParseDeepseekModel(json_text, label);
  if (IsLlama4ModelType(config.model_type) || config.model_type == "llama4") return ParseLlama4Model(json_text, label);
  if (IsGptOssModelType(config.model_type)) return ParseGptOssModel(json_text, label);
  if (config.model_type == "llama" || config.model_type == "mistral" || config.model_type == "qwen2" ||
      config.model_type == "qwen3") {
    config.family = ArchFamily::kLlama;
  } else if (config.model_type == "phi3") {
    config.family = ArchFamily::kPhi3;
  } else if (IsMoeModelType(config.model_type)) {
    config.family = ArchFamily::kMoe;
  } else if (config.model_type == "opt") {
    config.family = ArchFamily::kOpt;
  } else if (IsGemmaModelType(config.model_type)) {
    config.family = ArchFamily::kGemma;
  } else if (auto gemma = RefuseOtherGemma(config.model_type, label); !gemma.ok()) {
    return gemma;
  } else {
    return FieldError(label, "model_type", quark::StrCat("= \"", config.model_type, "\" is not supported (supported: ",
                                                        SupportedModelTypes(), ")"));
  }
  if (auto status = ParseSizes(root, label, config); !status.ok()) return status;
  config.bos_token_id = TokenIdField(root, "bos_token_id");
  config.eos_token_id = TokenIdField(root, "eos_token_id");
  config.torch_dtype = StringField(root, "torch_dtype", "");
  if (config.family == ArchFamily::kGemma) {
    if (auto status = ParseGemmaFields(root, label, config); !status.ok()) return status;
    if (auto status = ParseRopeScaling(root, label, config); !status.ok()) return status;
    return config;
  }
  if (config.family == ArchFamily::kOpt) {
    if (auto status = ParseOptFields(root, label, config); !status.ok()) return status;
    config.layer_norm_eps = 1e-5;
    if (config.hidden_act != "relu") {
      return FieldError(label, "activation_function", quark::StrCat("= \"", config.hidden_act, "\" is not supported (relu)"));
    }
    return config;
  }
  config.rms_norm_eps = DoubleField(root, "rms_norm_eps", 1e-6);
  config.rope_theta = DoubleField(root, "rope_theta", 10000.0);
  config.tie_word_embeddings = BoolField(root, "tie_word_embeddings", false);
  config.hidden_act = StringField(root, "hidden_act", "silu");
  if (config.hidden_act != "silu") {
    return FieldError(label, "hidden_act", quark::StrCat("= \"", config.hidden_act, "\" is not supported (silu)"));
  }
  const bool qwen2 = config.model_type == "qwen2";
  config.attention_bias = qwen2 || BoolField(root, "attention_bias", false);
  config.o_proj_bias = !qwen2 && BoolField(root, "attention_bias", false);
  config.mlp_bias = BoolField(root, "mlp_bias", false);
  config.qk_norm = config.model_type == "qwen3";
  if (config.family == ArchFamily::kPhi3) {
    if (auto status = CheckPhi3Fields(root, label, config); !status.ok()) return status;
  }
  if (auto status = ParseRopeScaling(root, label, config); !status.ok()) return status;
  if (auto status = ParseSlidingWindow(root, label, config); !status.ok()) return status;
  if (config.family == ArchFamily::kMoe) {
    if (auto status = ParseMoeFields(root, label, config); !status.ok()) return status;
  }
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(quark::StrCat("cannot read ", path));
  // Read at most one byte past the limit (the file may be a FIFO or grow while read: its size is not trusted).
  std::string text(static_cast<size_t>(kMaxConfigJsonBytes) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<int64_t>(text.size()) > kMaxConfigJsonBytes) {
    return absl::InvalidArgumentError(
        quark::StrCat(path, ": more than ", kMaxConfigJsonBytes, " bytes (a config.json is a few KiB)"));
  }
  return ParseModelConfig(text, path);
}

std::string ModelConfigToJson(const ModelConfig& c) {
  if (c.deepseek) return DeepseekConfigToJson(*c.deepseek);
  if (c.llama4) return Llama4ConfigToJson(*c.llama4);
  if (c.gpt_oss) return GptOssConfigToJson(*c.gpt_oss);
  json root;
  const bool opt = c.family == ArchFamily::kOpt;
  root["model_type"] = c.model_type;
  root["hidden_size"] = c.hidden_size;
  root["num_hidden_layers"] = c.num_hidden_layers;
  root["num_attention_heads"] = c.num_attention_heads;
  root["vocab_size"] = c.vocab_size;
  root["max_position_embeddings"] = c.max_position_embeddings;
  root["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.bos_token_id >= 0) root["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_id >= 0) root["eos_token_id"] = c.eos_token_id;
  if (!c.torch_dtype.empty()) root["torch_dtype"] = c.torch_dtype;
  if (c.family == ArchFamily::kGemma) {
    WriteGemmaFields(c, root);
    return root.dump(2) + "\n";
  }
  if (opt) {
    root["architectures"] = {"OPTForCausalLM"};
    root["ffn_dim"] = c.intermediate_size;
    root["activation_function"] = c.hidden_act;
    root["do_layer_norm_before"] = c.do_layer_norm_before;
    root["word_embed_proj_dim"] = c.word_embed_proj_dim;
    root["enable_bias"] = c.enable_bias;
    root["layer_norm_elementwise_affine"] = c.layer_norm_elementwise_affine;
    return root.dump(2) + "\n";
  }
  root["architectures"] = {c.model_type == "mistral" ? "MistralForCausalLM"
                           : c.model_type == "qwen2" ? "Qwen2ForCausalLM"
                           : c.model_type == "qwen3" ? "Qwen3ForCausalLM"
                           : c.model_type == "phi3" ? "Phi3ForCausalLM" : "LlamaForCausalLM"};
  root["intermediate_size"] = c.intermediate_size;
  root["num_key_value_heads"] = c.num_key_value_heads;
  root["head_dim"] = c.head_dim;
  root["rms_norm_eps"] = c.rms_norm_eps;
  root["rope_theta"] = c.rope_theta;
  root["hidden_act"] = c.hidden_act;
  root["attention_bias"] = c.model_type == "qwen2" ? false : c.attention_bias;
  root["mlp_bias"] = c.mlp_bias;
  WriteSlidingWindow(c, root);
  if (c.family == ArchFamily::kMoe) WriteMoeFields(c, root);
  if (c.rope_scaling) {
    root["rope_scaling"] = {{"rope_type", c.rope_scaling->rope_type}, {"factor", c.rope_scaling->factor},
                            {"low_freq_factor", c.rope_scaling->low_freq_factor},
                            {"high_freq_factor", c.rope_scaling->high_freq_factor},
                            {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings}};
  }
  return root.dump(2) + "\n";
}

}  // namespace quark::checkpoint
