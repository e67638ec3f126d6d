#include "core/export/gguf_gpt_oss.h"

#include <map>
#include <vector>

#include "core/base/log.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/model_config.h"
#include "core/export/gguf_model.h"
#include "core/export/gguf_mxfp4.h"
#include "core/export/gguf_whole_file.h"

namespace quark::exporter::gguf {
namespace {

using checkpoint::GptOssConfig;

constexpr char kGptOssArch[] = "gpt-oss";

Metadata GptOssMetadata(const GptOssConfig& c, const GgufVocab& vocab, GgmlType type, bool mxfp4_experts) {
  const checkpoint::ModelConfig& b = c.base;
  const std::string a = kGptOssArch;
  auto u32 = [](int64_t v) { return Value::U32(static_cast<uint32_t>(v)); };
  auto f32 = [](double v) { return Value::F32(static_cast<float>(v)); };
  Metadata md = WholeFileMetadata(a, "gpt_oss", b, b.num_key_value_heads);
  const std::pair<const char*, int64_t> ints[] = {
      {".feed_forward_length", b.intermediate_size},  {".expert_count", c.num_local_experts},
      {".expert_used_count", c.num_experts_per_tok},  {".attention.key_length", b.head_dim},
      {".attention.value_length", b.head_dim},        {".attention.sliding_window", b.sliding_window},
      {".expert_feed_forward_length", b.intermediate_size}};
  for (const auto& [key, value] : ints) md.emplace_back(a + key, u32(value));
  if (c.yarn) {
    md.emplace_back(a + ".rope.scaling.type", Value::Str("yarn"));
    md.emplace_back(a + ".rope.scaling.factor", f32(c.yarn->factor));
    md.emplace_back(a + ".rope.scaling.original_context_length", u32(c.yarn->original_max_position_embeddings));
    md.emplace_back(a + ".rope.scaling.yarn_beta_fast", f32(c.yarn->beta_fast));
    md.emplace_back(a + ".rope.scaling.yarn_beta_slow", f32(c.yarn->beta_slow));
  }
  AppendWholeFileTail(b, vocab, type, mxfp4_experts, md);
  return md;
}

// One layer's experts of one projection ("gate_up_proj" or "down_proj") as [E, out, in] weights and [E, out] biases:
// each expert's own linear where the source has it (the run's quantized values, an MXFP4 source's dequantized
// expert), else its slice of HF's fused tensor (x @ W: [E, in, out], transposed).
struct StackedExperts {
  at::Tensor weight, bias;
};
absl::StatusOr<StackedExperts> LayerExperts(const GptOssConfig& c, const runtime::WeightSource& weights, int64_t layer,
                                            const std::string& proj) {
  const std::string prefix = checkpoint::LayerPrefix(c.base, layer) + "mlp.experts.";
  const int64_t h = c.base.hidden_size, inter = c.base.intermediate_size;
  const bool gate_up = proj == "gate_up_proj";
  const int64_t out = gate_up ? 2 * inter : h, in = gate_up ? h : inter;
  at::Tensor fused_weight, fused_bias;
  std::vector<at::Tensor> ws, bs;
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    const std::string own = StrCat(prefix, e, ".", proj);
    at::Tensor w, b;
    if (weights.Has(own + ".weight")) {
      QUARK_ASSIGN_OR_RETURN(w, GetChecked(weights, own + ".weight", {out, in}));
    } else {
      if (!fused_weight.defined()) {
        QUARK_ASSIGN_OR_RETURN(fused_weight, GetChecked(weights, prefix + proj, {c.num_local_experts, in, out}));
      }
      w = fused_weight[e].t();
    }
    if (weights.Has(own + ".bias")) {
      QUARK_ASSIGN_OR_RETURN(b, GetChecked(weights, own + ".bias", {out}));
    } else {
      if (!fused_bias.defined()) {
        QUARK_ASSIGN_OR_RETURN(fused_bias, GetChecked(weights, prefix + proj + "_bias", {c.num_local_experts, out}));
      }
      b = fused_bias[e];
    }
    ws.push_back(w);
    bs.push_back(b);
  }
  return StackedExperts{at::stack(ws).contiguous(), at::stack(bs).contiguous()};
}

// Every GGUF tensor of decoder layer `i` in the plan's order (PlanGptOssGguf), typed by the plan later.
absl::Status AddLayer(const GptOssConfig& c, const runtime::WeightSource& weights, int64_t i,
                      std::vector<GgufTensorData>& out) {
  const checkpoint::ModelConfig& b = c.base;
  const std::string hf = checkpoint::LayerPrefix(b, i), blk = StrCat("blk.", i, ".");
  const int64_t h = b.hidden_size, q = b.num_attention_heads * b.head_dim, kv = b.num_key_value_heads * b.head_dim;
  auto add = [&](const std::string& from, const std::string& to, std::vector<int64_t> shape) -> absl::Status {
    QUARK_ASSIGN_OR_RETURN(at::Tensor t, GetChecked(weights, hf + from, shape));
    out.push_back({blk + to, t});
    return absl::OkStatus();
  };
  QUARK_RETURN_IF_ERROR(add("input_layernorm.weight", "attn_norm.weight", {h}));
  const std::pair<const char*, int64_t> attn[] = {{"q", q}, {"k", kv}, {"v", kv}};
  for (const auto& [name, rows] : attn) {
    QUARK_RETURN_IF_ERROR(add(StrCat("self_attn.", name, "_proj.weight"), StrCat("attn_", name, ".weight"), {rows, h}));
    QUARK_RETURN_IF_ERROR(add(StrCat("self_attn.", name, "_proj.bias"), StrCat("attn_", name, ".bias"), {rows}));
  }
  QUARK_RETURN_IF_ERROR(add("self_attn.o_proj.weight", "attn_output.weight", {h, q}));
  QUARK_RETURN_IF_ERROR(add("self_attn.o_proj.bias", "attn_output.bias", {h}));
  QUARK_RETURN_IF_ERROR(add("self_attn.sinks", "attn_sinks.weight", {b.num_attention_heads}));
  QUARK_RETURN_IF_ERROR(add("post_attention_layernorm.weight", "post_attention_norm.weight", {h}));
  QUARK_RETURN_IF_ERROR(add("mlp.router.weight", "ffn_gate_inp.weight", {c.num_local_experts, h}));
  QUARK_RETURN_IF_ERROR(add("mlp.router.bias", "ffn_gate_inp.bias", {c.num_local_experts}));
  using at::indexing::None;
  using at::indexing::Slice;
  QUARK_ASSIGN_OR_RETURN(const StackedExperts gate_up, LayerExperts(c, weights, i, "gate_up_proj"));
  // Gate and up alternate in HF's rows (the converter's [:, ::2] and [:, 1::2]).
  for (const auto& [proj, first] : {std::pair{"gate", 0}, std::pair{"up", 1}}) {
    out.push_back({StrCat(blk, "ffn_", proj, "_exps.weight"), gate_up.weight.index({Slice(), Slice(first, None, 2)}).contiguous()});
    out.push_back({StrCat(blk, "ffn_", proj, "_exps.bias"), gate_up.bias.index({Slice(), Slice(first, None, 2)}).contiguous()});
  }
  QUARK_ASSIGN_OR_RETURN(const StackedExperts down, LayerExperts(c, weights, i, "down_proj"));
  out.push_back({blk + "ffn_down_exps.weight", down.weight});
  out.push_back({blk + "ffn_down_exps.bias", down.bias});
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteGptOssGguf(const GptOssConfig& c, const runtime::WeightSource& weights,
                             const GgufVocab& vocab, GgmlType type, const std::set<std::string>& mxfp4,
                             const std::string& path) {
  QUARK_ASSIGN_OR_RETURN(const std::vector<TensorInfo> planned, PlanGptOssGguf(c, type, mxfp4));
  const checkpoint::ModelConfig& b = c.base;
  QUARK_RETURN_IF_ERROR(CheckVocabFits(vocab, b.vocab_size, "gguf gpt-oss"));
  if (c.yarn && !c.yarn->truncate) {
    log::Get("export")->warn(
        "gguf gpt-oss: rope_scaling.truncate is false, but llama.cpp always rounds YaRN's correction range to whole "
        "dimensions (floor / ceil), as HF does with truncate true: its RoPE differs slightly from the model's "
        "(as with convert_hf_to_gguf.py's files)");
  }
  std::vector<GgufTensorData> tensors;
  try {
    const std::vector<int64_t> table = {b.vocab_size, b.hidden_size};
    QUARK_ASSIGN_OR_RETURN(at::Tensor embed, GetChecked(weights, "model.embed_tokens.weight", table));
    tensors.push_back({"token_embd.weight", embed});
    for (int64_t i = 0; i < b.num_hidden_layers; ++i) QUARK_RETURN_IF_ERROR(AddLayer(c, weights, i, tensors));
    QUARK_ASSIGN_OR_RETURN(at::Tensor norm, GetChecked(weights, "model.norm.weight", {b.hidden_size}));
    tensors.push_back({"output_norm.weight", norm});
    // llama.cpp's gpt-oss requires output.weight: a tied model writes its embedding there.
    at::Tensor head = embed;
    if (!b.tie_word_embeddings) {
      QUARK_ASSIGN_OR_RETURN(head, GetChecked(weights, "lm_head.weight", table));
    }
    tensors.push_back({"output.weight", head});
  } catch (const c10::Error& e) {
    return absl::InternalError(StrCat("gguf gpt-oss: ", e.what_without_backtrace()));
  }
  QUARK_RETURN_IF_ERROR(TakePlannedTypes("gpt-oss", planned, tensors));
  bool any_mxfp4 = false;
  for (const GgufTensorData& t : tensors) any_mxfp4 |= t.type == kGgmlMxfp4;
  return WriteGgufTensors(GptOssMetadata(c, vocab, type, any_mxfp4), tensors, path);
}

absl::StatusOr<std::shared_ptr<runtime::TensorMapWeightSource>> GptOssWeightsFromGguf(const GptOssConfig& c,
                                                                                      const GgufFile& file) {
  const checkpoint::ModelConfig& b = c.base;
  auto weights = std::make_shared<runtime::TensorMapWeightSource>();
  // HF name -> GGUF name for the tensors taken as they are.
  std::map<std::string, std::string> plain = {{"model.embed_tokens.weight", "token_embd.weight"},
                                              {"model.norm.weight", "output_norm.weight"},
                                              {"lm_head.weight", "output.weight"}};
  const std::pair<const char*, const char*> layer_names[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"}, {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"}, {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.sinks", "attn_sinks.weight"},
      {"mlp.router.weight", "ffn_gate_inp.weight"}, {"mlp.router.bias", "ffn_gate_inp.bias"}};
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) {
    for (const auto& [hf, gg] : layer_names) plain[checkpoint::LayerPrefix(b, i) + hf] = StrCat("blk.", i, ".", gg);
  }
  for (const checkpoint::TensorSpec& spec : checkpoint::GptOssModelTensors(c)) {
    at::Tensor t;
    if (auto it = plain.find(spec.name); it != plain.end()) {
      QUARK_ASSIGN_OR_RETURN(t, DequantizedGgufTensor(file, it->second));
    } else {
      // A fused expert tensor: "model.layers.N.mlp.experts.<gate_up_proj|down_proj>[_bias]".
      const std::string prefix = "model.layers.";
      const int64_t layer = std::stoll(spec.name.substr(prefix.size()));
      const std::string blk = StrCat("blk.", layer, ".");
      const bool bias = spec.name.size() > 5 && spec.name.compare(spec.name.size() - 5, 5, "_bias") == 0;
      const std::string part = bias ? ".bias" : ".weight";
      if (spec.name.find("gate_up_proj") != std::string::npos) {
        QUARK_ASSIGN_OR_RETURN(at::Tensor gate, DequantizedGgufTensor(file, blk + "ffn_gate_exps" + part));
        QUARK_ASSIGN_OR_RETURN(at::Tensor up, DequantizedGgufTensor(file, blk + "ffn_up_exps" + part));
        if (gate.sizes() != up.sizes()) {
          return absl::InvalidArgumentError(StrCat(file.path(), ": ", blk, "ffn_gate_exps and ffn_up_exps differ in shape"));
        }
        // Interleave back: row 2k = gate k, row 2k + 1 = up k; weights then as x @ W ([E, in, 2I]).
        t = at::stack({gate, up}, 2).flatten(1, 2);
        if (!bias) t = t.transpose(1, 2);
      } else {
        QUARK_ASSIGN_OR_RETURN(t, DequantizedGgufTensor(file, blk + "ffn_down_exps" + part));
        if (!bias) t = t.transpose(1, 2);
      }
    }
    if (t.sizes() != at::IntArrayRef(spec.shape)) {
      return absl::InvalidArgumentError(StrCat(file.path(), ": \"", spec.name, "\" reads as [", StrJoin(t.sizes(), ", "),
                                               "] but config.json implies [", StrJoin(spec.shape, ", "), "]"));
    }
    weights->Set(spec.name, t.contiguous());
  }
  return weights;
}

absl::StatusOr<checkpoint::ModelConfig> GptOssModelConfigFromGguf(const GgufFile& file) {
  const std::string a = StrCat(kGptOssArch, ".");
  GptOssConfig c;
  checkpoint::ModelConfig& b = c.base;
  b.model_type = "gpt_oss";
  b.family = checkpoint::ArchFamily::kGptOss;
  b.torch_dtype = "float32";
  b.attention_bias = b.o_proj_bias = true;
  const std::pair<int64_t*, const char*> ints[] = {
      {&b.hidden_size, "embedding_length"}, {&b.intermediate_size, "expert_feed_forward_length"},
      {&b.num_hidden_layers, "block_count"}, {&b.num_attention_heads, "attention.head_count"},
      {&b.num_key_value_heads, "attention.head_count_kv"}, {&b.head_dim, "attention.key_length"},
      {&b.max_position_embeddings, "context_length"}, {&b.sliding_window, "attention.sliding_window"},
      {&c.num_local_experts, "expert_count"}, {&c.num_experts_per_tok, "expert_used_count"}};
  for (const auto& [field, key] : ints) {
    QUARK_ASSIGN_OR_RETURN(*field, file.GetInt(a + key));
  }
  QUARK_ASSIGN_OR_RETURN(b.rms_norm_eps, file.GetFloat(a + "attention.layer_norm_rms_epsilon"));
  QUARK_ASSIGN_OR_RETURN(b.rope_theta, file.GetFloat(a + "rope.freq_base"));
  const TensorInfo* embed = file.FindTensor("token_embd.weight");
  if (embed == nullptr || embed->ne.size() != 2) {
    return absl::InvalidArgumentError(StrCat(file.path(), ": tensor token_embd.weight is missing or not 2-D"));
  }
  b.vocab_size = embed->ne[1];
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) b.sliding_window_layers.push_back(i % 2 == 0);
  if (const Value* type = file.Find(a + "rope.scaling.type"); type != nullptr && type->text != "none") {
    if (type->text != "yarn") {
      return absl::InvalidArgumentError(StrCat(file.path(), ": ", a, "rope.scaling.type \"", type->text,
                                               "\" is not supported (yarn)"));
    }
    checkpoint::YarnScaling yarn;
    QUARK_ASSIGN_OR_RETURN(yarn.factor, file.GetFloat(a + "rope.scaling.factor"));
    QUARK_ASSIGN_OR_RETURN(yarn.original_max_position_embeddings, file.GetInt(a + "rope.scaling.original_context_length"));
    if (file.Find(a + "rope.scaling.yarn_beta_fast")) {
      QUARK_ASSIGN_OR_RETURN(yarn.beta_fast, file.GetFloat(a + "rope.scaling.yarn_beta_fast"));
    }
    if (file.Find(a + "rope.scaling.yarn_beta_slow")) {
      QUARK_ASSIGN_OR_RETURN(yarn.beta_slow, file.GetFloat(a + "rope.scaling.yarn_beta_slow"));
    }
    yarn.truncate = true;  // llama.cpp's correction range is always whole dimensions
    c.yarn = yarn;
  }
  for (const auto& [field, key] : {std::pair{&b.bos_token_id, "tokenizer.ggml.bos_token_id"},
                                   std::pair{&b.eos_token_id, "tokenizer.ggml.eos_token_id"}}) {
    if (file.Find(key)) {
      QUARK_ASSIGN_OR_RETURN(*field, file.GetInt(key));
    }
  }
  b.tie_word_embeddings = false;  // the file always holds output.weight
  return checkpoint::ParseModelConfig(checkpoint::GptOssConfigToJson(c), file.path());
}

}  // namespace quark::exporter::gguf

namespace quark::exporter {

absl::StatusOr<std::unique_ptr<ModelExporter>> CreateGptOssGgufExporter(const std::string& model_dir,
                                                                        const std::string& output_file,
                                                                        const LayerPlan& plan,
                                                                        const GgufExportOptions& options) {
  QUARK_ASSIGN_OR_RETURN(gguf::WholeFileModel in, gguf::OpenWholeFileModel(model_dir, options));
  if (!in.model.gpt_oss) return absl::InternalError(StrCat(model_dir, ": not a gpt_oss model"));
  QUARK_RETURN_IF_ERROR(gguf::CheckGptOssGguf(*in.model.gpt_oss));
  return gguf::CreateWholeFileGgufExporter(
      output_file, plan,
      [config = *in.model.gpt_oss, vocab = std::move(in.vocab), type = in.type](const runtime::WeightSource& weights,
                                                                const std::set<std::string>& mxfp4,
                                                                const std::string& path) {
        return gguf::WriteGptOssGguf(config, weights, vocab, type, mxfp4, path);
      });
}

}  // namespace quark::exporter
