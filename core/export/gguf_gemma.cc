#include "core/export/gguf_gemma.h"

#include <cmath>
#include <map>
#include <regex>

#include "core/base/status_macros.h"
#include "core/base/strings.h"

namespace quark::exporter::gguf {
namespace {

bool IsGemma(const checkpoint::ModelConfig& config) { return config.family == checkpoint::ArchFamily::kGemma; }

// llama.cpp's swa pattern (llama_hparams::set_swa_pattern): layer il slides when il % n < n - 1.
int64_t LlamaCppPattern(const std::string& arch) { return arch == "gemma2" ? 2 : 6; }

// llama.cpp's f_attention_scale: its "27B" types (gemma2: 46 layers, gemma3: 62) scale by (n_embd / n_head)**-0.5,
// the others by head_dim**-0.5.
double LlamaCppQueryScalar(const checkpoint::ModelConfig& c, const std::string& arch) {
  const bool big = c.num_hidden_layers == (arch == "gemma2" ? 46 : 62);
  return big ? static_cast<double>(c.hidden_size / c.num_attention_heads) : static_cast<double>(c.head_dim);
}

}  // namespace

absl::StatusOr<std::string> GemmaGgufArchitecture(const checkpoint::ModelConfig& c) {
  if (!IsGemma(c)) return std::string();
  const std::string arch = c.model_type == "gemma2" ? "gemma2" : "gemma3";
  const double scalar = LlamaCppQueryScalar(c, arch);
  if (c.query_pre_attn_scalar != scalar) {
    return absl::InvalidArgumentError(StrCat("query_pre_attn_scalar: ", c.query_pre_attn_scalar, " but llama.cpp's ",
                                             arch, " scales queries by ", scalar, "**-0.5 for this shape"));
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool slides = checkpoint::LayerAttentionWindow(c, i) > 0;
    const bool llama_cpp = c.sliding_window > 0 && i % LlamaCppPattern(arch) < LlamaCppPattern(arch) - 1;
    if (slides != llama_cpp) {
      return absl::InvalidArgumentError(StrCat("layer_types[", i, "]: ", slides ? "sliding" : "full",
                                               " attention, but llama.cpp's ", arch, " makes that layer ",
                                               llama_cpp ? "sliding" : "full"));
    }
  }
  if (arch == "gemma2" && (c.attn_logit_softcapping <= 0 || c.final_logit_softcapping <= 0)) {
    return absl::InvalidArgumentError("attn_logit_softcapping / final_logit_softcapping: llama.cpp's gemma2 always "
                                      "soft-caps both; a config without them has no GGUF export here");
  }
  if (arch == "gemma3" && c.attn_logit_softcapping > 0) {
    return absl::InvalidArgumentError(StrCat("attn_logit_softcapping: ", c.attn_logit_softcapping,
                                             ", but llama.cpp's gemma3 does not soft-cap attention"));
  }
  return arch;
}

std::string GemmaGgufTensorName(const checkpoint::ModelConfig& config, const std::string& hf_name) {
  if (!IsGemma(config)) return "";
  static const auto* names = new std::map<std::string, std::string>{
      {"post_attention_layernorm", "post_attention_norm"},
      {"pre_feedforward_layernorm", "ffn_norm"},
      {"post_feedforward_layernorm", "post_ffw_norm"}};
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+)\.weight)");
  std::smatch m;
  if (!std::regex_match(hf_name, m, layer)) return "";
  auto it = names->find(m[2].str());
  return it == names->end() ? "" : StrCat("blk.", m[1].str(), ".", it->second, ".weight");
}

float GemmaNormShift(const checkpoint::ModelConfig& config, const std::string& hf_name) {
  const std::string suffix = "norm.weight";
  const bool norm = hf_name.size() >= suffix.size() &&
                    hf_name.compare(hf_name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return IsGemma(config) && norm ? 1.0f : 0.0f;
}

void AppendGemmaMetadata(const checkpoint::ModelConfig& c, const std::string& arch, Metadata& md) {
  if (arch != "gemma2" && arch != "gemma3") return;
  if (c.sliding_window > 0) {
    md.emplace_back(arch + ".attention.sliding_window", Value::U32(static_cast<uint32_t>(c.sliding_window)));
  }
  if (c.attn_logit_softcapping > 0) {
    md.emplace_back(arch + ".attn_logit_softcapping", Value::F32(static_cast<float>(c.attn_logit_softcapping)));
  }
  if (c.final_logit_softcapping > 0) {
    md.emplace_back(arch + ".final_logit_softcapping", Value::F32(static_cast<float>(c.final_logit_softcapping)));
  }
  if (c.rope_local_base_freq > 0) {
    md.emplace_back(arch + ".rope.freq_base_swa", Value::F32(static_cast<float>(c.rope_local_base_freq)));
  }
}

absl::Status GemmaConfigFromGguf(const GgufFile& file, const std::string& arch, checkpoint::ModelConfig& c) {
  c.model_type = arch == "gemma2" ? "gemma2" : "gemma3_text";
  c.family = checkpoint::ArchFamily::kGemma;
  c.hidden_act = "gelu_pytorch_tanh";
  c.tie_word_embeddings = true;
  c.query_pre_attn_scalar = LlamaCppQueryScalar(c, arch);
  c.attn_logit_softcapping = c.final_logit_softcapping = 0;
  if (file.Find(arch + ".attn_logit_softcapping")) {
    QUARK_ASSIGN_OR_RETURN(c.attn_logit_softcapping, file.GetFloat(arch + ".attn_logit_softcapping"));
  }
  if (file.Find(arch + ".final_logit_softcapping")) {
    QUARK_ASSIGN_OR_RETURN(c.final_logit_softcapping, file.GetFloat(arch + ".final_logit_softcapping"));
  }
  c.rope_local_base_freq = 0;
  if (arch == "gemma3") {
    c.rope_local_base_freq = 10000.0;  // llama.cpp's default for gemma3's sliding layers
    if (file.Find(arch + ".rope.freq_base_swa")) {
      QUARK_ASSIGN_OR_RETURN(c.rope_local_base_freq, file.GetFloat(arch + ".rope.freq_base_swa"));
    }
  }
  c.sliding_window = 0;
  c.sliding_window_layers.clear();
  if (file.Find(arch + ".attention.sliding_window")) {
    QUARK_ASSIGN_OR_RETURN(c.sliding_window, file.GetInt(arch + ".attention.sliding_window"));
    const int64_t n = LlamaCppPattern(arch);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.sliding_window_layers.push_back(i % n < n - 1);
  }
  return absl::OkStatus();
}

}  // namespace quark::exporter::gguf
