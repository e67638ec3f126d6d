#include "core/export/gguf_moe.h"

#include <map>
#include <regex>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/export/gguf_arch_names.h"

namespace quark::exporter::gguf {
namespace {

// An expert's projection (HF name inside `experts.E.`) -> the stacked GGUF tensor. Mixtral's w1/w3/w2 are
// gate/up/down (MixtralBlockSparseTop2MLP: w2(silu(w1 x) * w3 x)).
const std::map<std::string, std::string>& ExpertNames() {
  static const auto* names = new std::map<std::string, std::string>{
      {"w1", "ffn_gate_exps"},        {"w3", "ffn_up_exps"},        {"w2", "ffn_down_exps"},
      {"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"},   {"down_proj", "ffn_down_exps"}};
  return *names;
}

// The MoE tensors of a layer that are not stacked.
const std::map<std::string, std::string>& MoeLayerNames() {
  static const auto* names = new std::map<std::string, std::string>{
      {"block_sparse_moe.gate", "ffn_gate_inp"},
      {"mlp.gate", "ffn_gate_inp"},
      {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
      {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
      {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
      {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
      {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"}};
  return *names;
}

}  // namespace

GgufSlot MoeTensorSlot(const std::string& hf_name) {
  static const std::regex expert(R"(model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.([a-z0-9_]+)\.weight)");
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+)\.weight)");
  std::smatch m;
  if (std::regex_match(hf_name, m, expert)) {
    auto it = ExpertNames().find(m[3].str());
    if (it == ExpertNames().end()) return {};
    return {StrCat("blk.", m[1].str(), ".", it->second, ".weight"), std::stoll(m[2].str())};
  }
  if (std::regex_match(hf_name, m, layer)) {
    auto it = MoeLayerNames().find(m[2].str());
    if (it != MoeLayerNames().end()) return {StrCat("blk.", m[1].str(), ".", it->second, ".weight"), -1};
  }
  return {};
}

GgufSlot GgufTensorSlot(const std::string& hf_name) {
  GgufSlot slot = MoeTensorSlot(hf_name);
  if (slot.name.empty()) slot.name = GgufTensorName(hf_name);
  return slot;
}

absl::StatusOr<std::string> MoeGgufArchitecture(const checkpoint::ModelConfig& config) {
  std::string arch;
  bool renormalizes = true;  // build_moe_ffn's norm_w for that architecture in llama.cpp
  if (config.model_type == "mixtral") arch = "llama";
  if (config.model_type == "qwen3_moe") arch = "qwen3moe";
  if (config.model_type == "qwen2_moe") {
    arch = "qwen2moe";
    renormalizes = false;
  }
  if (arch.empty()) return std::string();
  if (config.norm_topk_prob != renormalizes) {
    return absl::InvalidArgumentError(StrCat(
        "norm_topk_prob: ", config.norm_topk_prob ? "true" : "false", " for model_type ", config.model_type,
        ", but llama.cpp's ", arch, " architecture always ", renormalizes ? "renormalizes" : "keeps unnormalized",
        " the top-k routing weights (it reads no such key): the GGUF would compute another model"));
  }
  if (config.model_type == "qwen2_moe" && config.shared_expert_intermediate_size <= 0) {
    return absl::InvalidArgumentError("shared_expert_intermediate_size: llama.cpp's qwen2moe requires the shared "
                                      "expert (ffn_*_shexp) that this config does not have");
  }
  if (config.model_type == "qwen3_moe" && config.o_proj_bias) {
    return absl::InvalidArgumentError("attention_bias: llama.cpp's qwen3moe has no attn_output.bias for o_proj's bias");
  }
  return arch;
}

void AppendMoeMetadata(const checkpoint::ModelConfig& config, const std::string& arch, Metadata& md) {
  if (config.family != checkpoint::ArchFamily::kMoe) return;
  auto u32 = [](int64_t v) { return Value::U32(static_cast<uint32_t>(v)); };
  md.emplace_back(arch + ".expert_count", u32(config.num_experts));
  md.emplace_back(arch + ".expert_used_count", u32(config.num_experts_per_tok));
  // llama (mixtral) takes an expert's width from feed_forward_length (= intermediate_size, the expert's width).
  if (arch != "llama") md.emplace_back(arch + ".expert_feed_forward_length", u32(config.moe_intermediate_size));
  if (config.shared_expert_intermediate_size > 0) {
    md.emplace_back(arch + ".expert_shared_feed_forward_length", u32(config.shared_expert_intermediate_size));
  }
}

bool IsMoeGgufArchitecture(const GgufFile& file, const std::string& arch) {
  if (arch == "qwen2moe" || arch == "qwen3moe") return true;
  const Value* experts = file.Find("llama.expert_count");
  return arch == "llama" && experts != nullptr && experts->number > 0;
}

absl::Status MoeConfigFromGguf(const GgufFile& file, const std::string& arch, checkpoint::ModelConfig& c) {
  c.model_type = arch == "llama" ? "mixtral" : arch == "qwen2moe" ? "qwen2_moe" : "qwen3_moe";
  c.family = checkpoint::ArchFamily::kMoe;
  QUARK_ASSIGN_OR_RETURN(c.num_experts, file.GetInt(arch + ".expert_count"));
  QUARK_ASSIGN_OR_RETURN(c.num_experts_per_tok, file.GetInt(arch + ".expert_used_count"));
  c.moe_intermediate_size = c.intermediate_size;
  if (arch != "llama") {
    QUARK_ASSIGN_OR_RETURN(c.moe_intermediate_size, file.GetInt(arch + ".expert_feed_forward_length"));
  }
  if (arch == "qwen2moe") {
    QUARK_ASSIGN_OR_RETURN(c.shared_expert_intermediate_size,
                           file.GetInt(arch + ".expert_shared_feed_forward_length"));
  }
  c.norm_topk_prob = arch != "qwen2moe";
  c.qk_norm = file.FindTensor("blk.0.attn_q_norm.weight") != nullptr;
  return absl::OkStatus();
}

bool RequiresOutputTensor(const std::string& arch) { return arch == "qwen2moe"; }

bool KeptInF32(const std::string& gguf_name) {
  auto ends_with = [&](const std::string& suffix) {
    return gguf_name.size() >= suffix.size() &&
           gguf_name.compare(gguf_name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".ffn_gate_inp.weight") || ends_with(".ffn_gate_inp_shexp.weight");
}

}  // namespace quark::exporter::gguf
