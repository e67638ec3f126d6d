#include "core/export/gguf_arch_names.h"

#include <map>
#include <regex>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/export/gguf_dense.h"
#include "core/export/gguf_gemma.h"
#include "core/export/gguf_moe.h"

namespace quark::exporter::gguf {
namespace {

// HF module names inside a decoder layer -> llama.cpp's.
const std::map<std::string, std::string>& LayerNames() {
  static const auto* names = new std::map<std::string, std::string>{
      {"self_attn.q_proj", "attn_q"},      {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},      {"self_attn.o_proj", "attn_output"},
      {"mlp.gate_proj", "ffn_gate"},       {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},       {"input_layernorm", "attn_norm"},
      {"post_attention_layernorm", "ffn_norm"}};
  return *names;
}

const std::map<std::string, std::string>& GlobalNames() {
  static const auto* names = new std::map<std::string, std::string>{
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  return *names;
}

}  // namespace

absl::StatusOr<std::string> GgufArchitecture(const checkpoint::ModelConfig& config) {
  std::string arch;
  if (config.model_type == "llama" || config.model_type == "mistral") arch = "llama";
  if (config.model_type == "qwen2") arch = "qwen2";
  if (arch.empty()) arch = DenseGgufArchitecture(config);  // qwen3, phi3
  if (arch.empty()) {
    QUARK_ASSIGN_OR_RETURN(arch, GemmaGgufArchitecture(config));  // gemma2, gemma3; "" otherwise
  }
  if (arch.empty()) {
    QUARK_ASSIGN_OR_RETURN(arch, MoeGgufArchitecture(config));  // mixtral, qwen2_moe, qwen3_moe; "" otherwise
  }
  if (arch.empty()) {
    return absl::InvalidArgumentError(StrCat("model_type: \"", config.model_type,
                                             "\" has no GGUF export here (llama, mistral, qwen2, mixtral, qwen2_moe, qwen3_moe)"));
  }
  if (config.rope_scaling && config.rope_scaling->rope_type != "linear") {
    return absl::InvalidArgumentError(StrCat("rope_scaling: rope_type \"", config.rope_scaling->rope_type,
                                             "\" needs llama.cpp's rope_freqs tensor, which the GGUF export does "
                                             "not write"));
  }
  return arch;
}

std::string GgufTensorName(const std::string& hf_name) {
  if (auto it = GlobalNames().find(hf_name); it != GlobalNames().end()) return it->second;
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(hf_name, m, layer)) return "";
  if (const std::string dense = DenseLayerTensorName(m[2].str()); !dense.empty()) {
    return StrCat("blk.", m[1].str(), ".", dense, ".", m[3].str());
  }
  auto it = LayerNames().find(m[2].str());
  if (it == LayerNames().end()) return MoeTensorSlot(hf_name).name;  // experts: the stacked tensor's name
  return StrCat("blk.", m[1].str(), ".", it->second, ".", m[3].str());
}

std::string HfTensorName(const std::string& gguf_name) {
  for (const auto& [hf, gg] : GlobalNames()) {
    if (gg == gguf_name) return hf;
  }
  static const std::regex block(R"(blk\.(\d+)\.([a-z_]+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(gguf_name, m, block)) return "";
  for (const auto& [hf, gg] : LayerNames()) {
    if (gg == m[2].str()) return StrCat("model.layers.", m[1].str(), ".", hf, ".", m[3].str());
  }
  return "";
}

int64_t PermutedHeads(const checkpoint::ModelConfig& config, const std::string& hf_name) {
  if (!DenseGgufArchitecture(config).empty()) return 0;  // qwen3, phi3: NEOX RoPE, converted unpermuted
  if (config.family == checkpoint::ArchFamily::kGemma) return 0;  // NEOX RoPE as well
  if (config.model_type == "qwen2" || config.model_type == "qwen2_moe" || config.model_type == "qwen3_moe") return 0;
  auto ends_with = [&](const std::string& suffix) {
    return hf_name.size() >= suffix.size() && hf_name.compare(hf_name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with("self_attn.q_proj.weight") || ends_with("self_attn.q_proj.bias")) return config.num_attention_heads;
  if (ends_with("self_attn.k_proj.weight") || ends_with("self_attn.k_proj.bias")) return config.num_key_value_heads;
  return 0;
}

}  // namespace quark::exporter::gguf
