#include "core/export/gguf_deepseek_plan.h"

#include <map>
#include <optional>

#include "core/base/strings.h"
#include "core/checkpoint/deepseek_layout.h"

namespace quark::exporter::gguf {
namespace {

// ggml order: the HF shape reversed (ne[0] = the row).
std::vector<int64_t> Ne(std::vector<int64_t> shape) { return {shape.rbegin(), shape.rend()}; }

}  // namespace

const std::vector<std::pair<std::string, std::string>>& DeepseekLayerNames() {
  static const std::vector<std::pair<std::string, std::string>> kNames = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
      {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
      {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
      {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
      {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
      {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
  };
  return kNames;
}

absl::Status CheckDeepseekGguf(const checkpoint::DeepseekConfig& c) {
  if (!c.rope_interleave) {
    return absl::InvalidArgumentError(
        "gguf deepseek2: field \"rope_interleave\" = false is not supported (llama.cpp "
        "rotates adjacent pairs: the checkpoint's interleaved order)");
  }
  // llama.cpp (llama-model.cpp, LLM_ARCH_DEEPSEEK2) takes a model of 26 or 27 layers for a "lite" one, with a plain
  // attn_q and no q_lora_rank key, and every other model for one with q_a/q_b: it does not read q_lora_rank's absence.
  const bool lite = c.base.num_hidden_layers == 26 || c.base.num_hidden_layers == 27;
  if (lite != (c.q_lora_rank == 0)) {
    return absl::InvalidArgumentError(
        StrCat("gguf deepseek2: field \"q_lora_rank\" = ", c.q_lora_rank > 0 ? std::to_string(c.q_lora_rank) : "null",
               " with num_hidden_layers = ", c.base.num_hidden_layers,
               " is not what llama.cpp reads (a null q_lora_rank only "
               "with 26 or 27 layers, as DeepSeek-V2-Lite; otherwise q_a_proj/q_b_proj)"));
  }
  if (c.yarn && (c.yarn->attention_factor > 0 || c.yarn->mscale != c.yarn->mscale_all_dim)) {
    return absl::InvalidArgumentError(StrCat(
        "gguf deepseek2: field \"rope_scaling.mscale\" = ", c.yarn->mscale, " with mscale_all_dim = ",
        c.yarn->mscale_all_dim, (c.yarn->attention_factor > 0 ? " and an attention_factor" : ""),
        " scales RoPE's cos/sin, which llama.cpp's deepseek2 cannot express (it assumes mscale = mscale_all_dim)"));
  }
  return absl::OkStatus();
}

GgmlType DeepseekTensorType(const std::string& name, const std::vector<int64_t>& ne, GgmlType asked) {
  if (asked != GgmlType::kQ8_0 || ne.size() < 2 || ne[0] % 32 != 0) return GgmlType::kF32;
  if (name.find("ffn_gate_inp") != std::string::npos) return GgmlType::kF32;
  return GgmlType::kQ8_0;
}

absl::StatusOr<std::vector<TensorInfo>> PlanDeepseekGguf(const checkpoint::DeepseekConfig& c, GgmlType type) {
  if (type != GgmlType::kF32 && type != GgmlType::kQ8_0) {
    return absl::InvalidArgumentError("gguf deepseek2: type must be F32 or Q8_0");
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const checkpoint::TensorSpec& t : checkpoint::DeepseekModelTensors(c)) shapes[t.name] = t.shape;
  std::vector<TensorInfo> out;
  const auto add = [&](const std::string& name, std::vector<int64_t> ne, std::optional<GgmlType> fixed = {}) {
    const GgmlType t = fixed ? *fixed : DeepseekTensorType(name, ne, type);
    out.push_back({name, std::move(ne), t});
  };
  add("token_embd.weight", Ne(shapes.at("model.embed_tokens.weight")));
  const int64_t heads = c.base.num_attention_heads, nope = c.qk_nope_head_dim, v = c.v_head_dim;
  for (int64_t i = 0; i < c.base.num_hidden_layers; ++i) {
    const std::string hf = StrCat("model.layers.", i, "."), blk = StrCat("blk.", i, ".");
    for (const auto& [from, to] : DeepseekLayerNames()) {
      auto it = shapes.find(hf + from);
      if (it != shapes.end()) add(blk + to, Ne(it->second));
    }
    add(blk + "attn_k_b.weight", {nope, c.kv_lora_rank, heads});  // [H, kv_lora, nope]
    add(blk + "attn_v_b.weight", {c.kv_lora_rank, v, heads});     // [H, v, kv_lora]
    if (!c.IsMoeLayer(i)) continue;
    for (const char* proj : {"gate", "up", "down"}) {
      std::vector<int64_t> ne = Ne(shapes.at(StrCat(hf, "mlp.experts.0.", proj, "_proj.weight")));
      ne.push_back(c.n_routed_experts);  // [E, out, in]
      add(StrCat(blk, "ffn_", proj, "_exps.weight"), std::move(ne));
    }
  }
  add("output_norm.weight", Ne(shapes.at("model.norm.weight")), GgmlType::kF32);
  if (!c.base.tie_word_embeddings) add("output.weight", Ne(shapes.at("lm_head.weight")));
  return out;
}

}  // namespace quark::exporter::gguf
