#include "core/export/gguf_gpt_oss_plan.h"

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/gguf_mxfp4.h"
#include "core/export/gguf_whole_file_plan.h"

namespace quark::exporter::gguf {
namespace {

using checkpoint::GptOssConfig;

// The experts' SwiGLU constants llama.cpp hard-codes (build_moe_ffn's LLM_FFN_SWIGLU_OAI_MOE).
constexpr double kSwigluAlpha = 1.702, kSwigluLimit = 7.0;

}  // namespace

absl::Status CheckGptOssGguf(const GptOssConfig& c) {
  const checkpoint::ModelConfig& b = c.base;
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) {
    const bool sliding = c.LayerWindow(i) > 0;
    if (sliding != (i % 2 == 0) || (sliding && c.LayerWindow(i) != b.sliding_window)) {
      return absl::InvalidArgumentError(StrCat(
          "gguf gpt-oss: field \"layer_types\": layer ", i, " is ", sliding ? "sliding" : "full",
          " attention, but llama.cpp's gpt-oss attends with sliding_window on even layers and fully on odd ones (its "
          "fixed pattern; the converter writes no per-layer pattern)"));
    }
  }
  if (c.swiglu_alpha != kSwigluAlpha || c.swiglu_limit != kSwigluLimit) {
    return absl::InvalidArgumentError(StrCat("gguf gpt-oss: fields \"swiglu_alpha\" = ", c.swiglu_alpha,
                                             ", \"swiglu_limit\" = ", c.swiglu_limit,
                                             ": llama.cpp's gpt-oss hard-codes 1.702 and 7"));
  }
  if (!b.attention_bias) {
    return absl::InvalidArgumentError(
        "gguf gpt-oss: field \"attention_bias\" = false: llama.cpp's gpt-oss requires attn_output.bias");
  }
  if (c.yarn && (c.yarn->mscale != 0 || c.yarn->mscale_all_dim != 0 || c.yarn->attention_factor != 0)) {
    return absl::InvalidArgumentError(
        "gguf gpt-oss: field \"rope_scaling\" has mscale, mscale_all_dim or attention_factor: llama.cpp scales YaRN's "
        "cos/sin by 1 + 0.1 ln(factor) alone, as HF does only without them");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorInfo>> PlanGptOssGguf(const GptOssConfig& c, GgmlType type,
                                                      const std::set<std::string>& mxfp4) {
  if (type != GgmlType::kF32 && type != GgmlType::kQ8_0) {
    return absl::InvalidArgumentError("gguf gpt-oss: type must be F32 or Q8_0");
  }
  QUARK_RETURN_IF_ERROR(CheckGptOssGguf(c));
  const checkpoint::ModelConfig& b = c.base;
  const int64_t h = b.hidden_size, q = b.num_attention_heads * b.head_dim, kv = b.num_key_value_heads * b.head_dim;
  const int64_t e = c.num_local_experts, inter = b.intermediate_size;
  std::vector<TensorInfo> out;
  // ne: ggml order (the row first); 1-D tensors and the router are F32.
  const auto add = [&](std::string name, std::vector<int64_t> ne, bool f32 = false) {
    AddPlannedTensor(out, std::move(name), std::move(ne), type, f32);
  };
  add("token_embd.weight", {h, b.vocab_size});
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) {
    const std::string blk = StrCat("blk.", i, ".");
    add(blk + "attn_norm.weight", {h});
    for (const auto& [name, rows] : {std::pair{"q", q}, std::pair{"k", kv}, std::pair{"v", kv}}) {
      add(StrCat(blk, "attn_", name, ".weight"), {h, rows});
      add(StrCat(blk, "attn_", name, ".bias"), {rows});
    }
    add(blk + "attn_output.weight", {q, h});
    add(blk + "attn_output.bias", {h});
    add(blk + "attn_sinks.weight", {b.num_attention_heads});
    add(blk + "post_attention_norm.weight", {h});
    add(blk + "ffn_gate_inp.weight", {h, e}, /*f32=*/true);
    add(blk + "ffn_gate_inp.bias", {e});
    const std::string experts = checkpoint::LayerPrefix(b, i) + "mlp.experts.";
    QUARK_ASSIGN_OR_RETURN(const bool gate_up_mxfp4, ExpertsMxfp4(experts, e, "gate_up_proj", mxfp4));
    QUARK_ASSIGN_OR_RETURN(const bool down_mxfp4, ExpertsMxfp4(experts, e, "down_proj", mxfp4));
    for (const char* proj : {"gate", "up"}) {
      add(StrCat(blk, "ffn_", proj, "_exps.weight"), {h, inter, e});
      if (gate_up_mxfp4) out.back().type = kGgmlMxfp4;
      add(StrCat(blk, "ffn_", proj, "_exps.bias"), {inter, e}, /*f32=*/true);
    }
    add(blk + "ffn_down_exps.weight", {inter, h, e});
    if (down_mxfp4) out.back().type = kGgmlMxfp4;
    add(blk + "ffn_down_exps.bias", {h, e}, /*f32=*/true);
  }
  add("output_norm.weight", {h});
  add("output.weight", {h, b.vocab_size});  // always: llama.cpp's gpt-oss requires it
  return out;
}

}  // namespace quark::exporter::gguf
