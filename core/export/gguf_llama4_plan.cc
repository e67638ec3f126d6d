#include "core/export/gguf_llama4_plan.h"

#include <map>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/gguf_mxfp4.h"
#include "core/export/gguf_whole_file_plan.h"

namespace quark::exporter::gguf {

using checkpoint::Llama4Config;

int64_t Llama4MoeStep(const Llama4Config& c) {
  int64_t step = 0;
  while (step < static_cast<int64_t>(c.moe_layers.size()) && !c.moe_layers[step]) ++step;
  ++step;
  for (int64_t i = 0; i < static_cast<int64_t>(c.moe_layers.size()); ++i) {
    if (c.moe_layers[i] != ((i + 1) % step == 0)) return 0;
  }
  return step <= static_cast<int64_t>(c.moe_layers.size()) ? step : 0;
}

std::vector<std::pair<std::string, std::string>> Llama4LayerGgufNames(const Llama4Config& c, int64_t i) {
  std::vector<std::pair<std::string, std::string>> names = {
      {"input_layernorm.weight", "attn_norm.weight"},         {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},           {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},      {"post_attention_layernorm.weight", "ffn_norm.weight"}};
  const std::string ffn = c.IsMoeLayer(i) ? "feed_forward.shared_expert." : "feed_forward.";
  const std::string suffix = c.IsMoeLayer(i) ? "_shexp.weight" : ".weight";
  for (const char* proj : {"gate", "up", "down"}) names.push_back({StrCat(ffn, proj, "_proj.weight"), StrCat("ffn_", proj, suffix)});
  if (c.IsMoeLayer(i)) names.push_back({"feed_forward.router.weight", "ffn_gate_inp.weight"});
  return names;
}

absl::Status CheckLlama4Gguf(const Llama4Config& c) {
  const checkpoint::ModelConfig& b = c.base;
  auto refuse = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(StrCat("gguf llama4: field \"", field, "\" ", why));
  };
  if (Llama4MoeStep(c) == 0) {
    return refuse("moe_layers", "is not every interleave_moe_layer_step-th layer ((i + 1) % step == 0), the only MoE "
                                "layout llama.cpp's llama4 reads");
  }
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) {
    if (c.rope_layers[i] != ((i + 1) % kLlama4NoRopeStep != 0)) {
      return refuse("no_rope_layers", StrCat("makes layer ", i, c.rope_layers[i] ? " a RoPE" : " a NoPE",
                                             " layer, but llama.cpp's llama4 skips RoPE on every 4th layer alone"));
    }
    if (c.chunked_layers[i] != c.rope_layers[i]) {
      return refuse("layer_types", StrCat("makes layer ", i, c.chunked_layers[i] ? " chunked" : " full",
                                          " attention, but llama.cpp's llama4 chunks exactly its RoPE layers"));
    }
  }
  if (c.attention_chunk_size != kLlama4Chunk) {
    return refuse("attention_chunk_size", StrCat("= ", c.attention_chunk_size, ": llama.cpp's llama4 hard-codes 8192"));
  }
  if (!c.attn_temperature_tuning || c.floor_scale != kLlama4FloorScale || c.attn_scale != kLlama4AttnScale) {
    return refuse("attn_temperature_tuning", StrCat("/ floor_scale / attn_scale = ", c.attn_temperature_tuning, " / ",
                                                    c.floor_scale, " / ", c.attn_scale,
                                                    ": llama.cpp's llama4 always tunes NoPE layers with 8192 / 0.1"));
  }
  if (c.use_qk_norm != (c.num_local_experts != kLlama4MaverickExperts)) {
    return refuse("use_qk_norm", StrCat("= ", c.use_qk_norm ? "true" : "false", " with ", c.num_local_experts,
                                        " experts: llama.cpp's llama4 applies the L2 QK norm exactly when the model "
                                        "has not 128 experts"));
  }
  if (b.attention_bias) return refuse("attention_bias", "= true: llama.cpp's llama4 has no attn_output.bias");
  if (b.rope_scaling && b.rope_scaling->rope_type != "llama3" && b.rope_scaling->rope_type != "linear") {
    return refuse("rope_scaling", StrCat("type \"", b.rope_scaling->rope_type, "\" is not llama3 or linear"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorInfo>> PlanLlama4Gguf(const Llama4Config& c, GgmlType type,
                                                      const std::set<std::string>& mxfp4) {
  if (type != GgmlType::kF32 && type != GgmlType::kQ8_0) {
    return absl::InvalidArgumentError("gguf llama4: type must be F32 or Q8_0");
  }
  QUARK_RETURN_IF_ERROR(CheckLlama4Gguf(c));
  const checkpoint::ModelConfig& b = c.base;
  std::vector<TensorInfo> out;
  // ne: ggml order (the row first); 1-D tensors and the router are F32.
  const auto add = [&](std::string name, std::vector<int64_t> ne, bool f32 = false) {
    AddPlannedTensor(out, std::move(name), std::move(ne), type, f32);
  };
  const auto ne_of = [](const std::vector<int64_t>& shape) { return std::vector<int64_t>(shape.rbegin(), shape.rend()); };
  add("token_embd.weight", {b.hidden_size, b.vocab_size});
  if (b.rope_scaling && b.rope_scaling->rope_type == "llama3") add("rope_freqs.weight", {b.head_dim / 2});
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) {
    std::map<std::string, std::vector<int64_t>> shapes;  // HF relative name -> HF shape
    for (const checkpoint::LinearSpec& l : checkpoint::Llama4LayerLinears(c, i)) {
      shapes[l.relative_name + ".weight"] = {l.out_features, l.in_features};
    }
    shapes["input_layernorm.weight"] = shapes["post_attention_layernorm.weight"] = {b.hidden_size};
    shapes["feed_forward.router.weight"] = {c.num_local_experts, b.hidden_size};
    const std::string blk = StrCat("blk.", i, ".");
    for (const auto& [from, to] : Llama4LayerGgufNames(c, i)) {
      add(blk + to, ne_of(shapes.at(from)), /*f32=*/to == "ffn_gate_inp.weight");
    }
    if (!c.IsMoeLayer(i)) continue;
    const std::string experts = checkpoint::LayerPrefix(b, i) + "feed_forward.experts.";
    for (const char* proj : {"gate", "up", "down"}) {
      const std::string module = StrCat(proj, "_proj");
      std::vector<int64_t> ne = ne_of(shapes.at(StrCat("feed_forward.experts.0.", module, ".weight")));
      ne.push_back(c.num_local_experts);
      QUARK_ASSIGN_OR_RETURN(const bool as_mxfp4, ExpertsMxfp4(experts, c.num_local_experts, module, mxfp4));
      add(StrCat(blk, "ffn_", proj, "_exps.weight"), std::move(ne));
      if (as_mxfp4) out.back().type = kGgmlMxfp4;
    }
  }
  add("output_norm.weight", {b.hidden_size});
  if (!b.tie_word_embeddings) add("output.weight", {b.hidden_size, b.vocab_size});
  return out;
}

}  // namespace quark::exporter::gguf
