#include "core/export/gguf_deepseek.h"

#include <algorithm>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/export/gguf_deepseek_plan.h"
#include "core/export/gguf_model.h"
#include "core/export/gguf_whole_file.h"
#include "core/export/gguf_whole_file_plan.h"

namespace quark::exporter::gguf {
namespace {

using checkpoint::DeepseekConfig;

// llama.cpp's expert_gating_func for sigmoid (LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID).
constexpr uint32_t kGatingSigmoid = 2;

using GgufTensor = GgufTensorData;

Metadata DeepseekMetadata(const DeepseekConfig& c, const GgufVocab& vocab, GgmlType type) {
  const checkpoint::ModelConfig& b = c.base;
  const std::string a = "deepseek2";
  auto u32 = [](int64_t v) { return Value::U32(static_cast<uint32_t>(v)); };
  auto f32 = [](double v) { return Value::F32(static_cast<float>(v)); };
  Metadata md = WholeFileMetadata(a, "deepseek_v3", b, /*kv_heads=*/1);  // MLA as MQA
  const Metadata rest = {
      {a + ".feed_forward_length", u32(b.intermediate_size)},
      {a + ".expert_used_count", u32(c.num_experts_per_tok)},
      {a + ".leading_dense_block_count", u32(c.first_k_dense_replace)},
      {a + ".vocab_size", u32(b.vocab_size)},
      {a + ".attention.kv_lora_rank", u32(c.kv_lora_rank)},
      {a + ".attention.key_length", u32(c.kv_lora_rank + c.qk_rope_head_dim)},
      {a + ".attention.value_length", u32(c.kv_lora_rank)},
      {a + ".attention.key_length_mla", u32(c.qk_head_dim())},
      {a + ".attention.value_length_mla", u32(c.v_head_dim)},
      {a + ".expert_feed_forward_length", u32(c.moe_intermediate_size)},
      {a + ".expert_count", u32(c.n_routed_experts)},
      {a + ".expert_shared_count", u32(c.n_shared_experts)},
      {a + ".expert_weights_scale", f32(c.routed_scaling_factor)},
      {a + ".expert_weights_norm", Value::Bool(c.norm_topk_prob)},
      {a + ".expert_gating_func", u32(kGatingSigmoid)},
      {a + ".expert_group_count", u32(c.n_group)},
      {a + ".expert_group_used_count", u32(c.topk_group)},
      {a + ".rope.dimension_count", u32(c.qk_rope_head_dim)},
  };
  md.insert(md.end(), rest.begin(), rest.end());
  if (c.q_lora_rank > 0) md.emplace_back(a + ".attention.q_lora_rank", u32(c.q_lora_rank));
  if (c.yarn) {
    md.emplace_back(a + ".rope.scaling.type", Value::Str("yarn"));
    md.emplace_back(a + ".rope.scaling.factor", f32(c.yarn->factor));
    md.emplace_back(a + ".rope.scaling.original_context_length", u32(c.yarn->original_max_position_embeddings));
    md.emplace_back(a + ".rope.scaling.yarn_log_multiplier", f32(0.1 * c.yarn->mscale_all_dim));
  }
  AppendWholeFileTail(b, vocab, type, /*mxfp4_experts=*/false, md);
  return md;
}

// A weight's type in the file (gguf_deepseek_plan.h), from its torch sizes (ggml's ne reversed).
GgmlType TypeOf(const std::string& name, const at::Tensor& data, GgmlType asked) {
  return DeepseekTensorType(name, std::vector<int64_t>(data.sizes().rbegin(), data.sizes().rend()), asked);
}

absl::StatusOr<at::Tensor> Get(const runtime::WeightSource& weights, const std::string& name) {
  auto t = weights.Get(name, at::kFloat);
  if (!t.ok()) return t.status();
  return t->contiguous();
}

// Every GGUF tensor of decoder layer `i`.
absl::Status AddLayer(const DeepseekConfig& c, const runtime::WeightSource& weights, int64_t i, GgmlType type,
                      std::vector<GgufTensor>& out) {
  const std::string hf = StrCat("model.layers.", i, "."), blk = StrCat("blk.", i, ".");
  for (const auto& [from, to] : DeepseekLayerNames()) {
    if (!weights.Has(hf + from)) continue;  // the other kind of layer, or q_proj vs q_a/q_b
    QUARK_ASSIGN_OR_RETURN(at::Tensor t, Get(weights, hf + from));
    out.push_back({blk + to, t, TypeOf(to, t, type)});
  }
  const int64_t heads = c.base.num_attention_heads, nope = c.qk_nope_head_dim, v = c.v_head_dim;
  QUARK_ASSIGN_OR_RETURN(at::Tensor kv_b, Get(weights, hf + "self_attn.kv_b_proj.weight"));
  if (kv_b.sizes() != at::IntArrayRef({heads * (nope + v), c.kv_lora_rank})) {
    return absl::InvalidArgumentError(StrCat("tensor \"", hf, "self_attn.kv_b_proj.weight\" has shape [",
                                             StrJoin(kv_b.sizes(), ", "), "], config.json implies [", heads * (nope + v),
                                             ", ", c.kv_lora_rank, "]"));
  }
  const at::Tensor per_head = kv_b.view({heads, nope + v, c.kv_lora_rank});
  const at::Tensor k_b = per_head.narrow(1, 0, nope).transpose(1, 2).contiguous();  // [H, kv_lora, nope]
  const at::Tensor v_b = per_head.narrow(1, nope, v).contiguous();                  // [H, v, kv_lora]
  out.push_back({blk + "attn_k_b.weight", k_b, TypeOf("attn_k_b", k_b, type)});
  out.push_back({blk + "attn_v_b.weight", v_b, TypeOf("attn_v_b", v_b, type)});
  if (!c.IsMoeLayer(i)) return absl::OkStatus();
  for (const char* proj : {"gate", "up", "down"}) {
    std::vector<at::Tensor> experts;
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      QUARK_ASSIGN_OR_RETURN(at::Tensor t, Get(weights, StrCat(hf, "mlp.experts.", e, ".", proj, "_proj.weight")));
      experts.push_back(t);
    }
    const at::Tensor stacked = at::stack(experts);  // [E, out, in]
    out.push_back({StrCat(blk, "ffn_", proj, "_exps.weight"), stacked, TypeOf("exps", stacked, type)});
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteDeepseekGguf(const DeepseekConfig& c, const runtime::WeightSource& weights,
                               const GgufVocab& vocab, GgmlType type, const std::string& path) {
  if (type != GgmlType::kF32 && type != GgmlType::kQ8_0) {
    return absl::InvalidArgumentError("gguf deepseek2: type must be F32 or Q8_0");
  }
  if (auto s = CheckDeepseekGguf(c); !s.ok()) return s;
  QUARK_RETURN_IF_ERROR(CheckVocabFits(vocab, c.base.vocab_size, "gguf deepseek2"));
  std::vector<GgufTensor> tensors;
  try {
    QUARK_ASSIGN_OR_RETURN(at::Tensor embed, Get(weights, "model.embed_tokens.weight"));
    tensors.push_back({"token_embd.weight", embed, TypeOf("token_embd", embed, type)});
    for (int64_t i = 0; i < c.base.num_hidden_layers; ++i) {
      if (auto s = AddLayer(c, weights, i, type, tensors); !s.ok()) return s;
    }
    QUARK_ASSIGN_OR_RETURN(at::Tensor norm, Get(weights, "model.norm.weight"));
    tensors.push_back({"output_norm.weight", norm, GgmlType::kF32});
    if (!c.base.tie_word_embeddings) {
      QUARK_ASSIGN_OR_RETURN(at::Tensor head, Get(weights, "lm_head.weight"));
      tensors.push_back({"output.weight", head, TypeOf("output", head, type)});
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(StrCat("gguf deepseek2: ", e.what_without_backtrace()));
  }
  std::vector<TensorInfo> infos;
  for (const GgufTensor& t : tensors) {
    std::vector<int64_t> ne(t.data.sizes().rbegin(), t.data.sizes().rend());
    infos.push_back({t.name, ne, t.type});
  }
  // The layout is the plan's (what the estimator sizes): a checkpoint that differs from its config is refused.
  QUARK_ASSIGN_OR_RETURN(const std::vector<TensorInfo> planned, PlanDeepseekGguf(c, type));
  QUARK_RETURN_IF_ERROR(CheckAgainstPlan("deepseek2", infos, planned));
  return WriteGgufTensors(DeepseekMetadata(c, vocab, type), tensors, path);
}

absl::StatusOr<std::shared_ptr<runtime::TensorMapWeightSource>> DeepseekWeightsFromGguf(const DeepseekConfig& c,
                                                                                        const GgufFile& file) {
  auto weights = std::make_shared<runtime::TensorMapWeightSource>();
  std::map<std::string, std::string> names = {{"model.embed_tokens.weight", "token_embd.weight"},
                                              {"model.norm.weight", "output_norm.weight"},
                                              {"lm_head.weight", "output.weight"}};
  std::map<std::string, at::Tensor> stacked;  // GGUF expert stacks, read once per layer
  for (const checkpoint::TensorSpec& spec : checkpoint::DeepseekModelTensors(c)) {
    if (checkpoint::IsDeepseekMtpTensor(c, spec.name)) continue;
    at::Tensor t;
    const int64_t layer = spec.name.rfind("model.layers.", 0) == 0 ? std::stoll(spec.name.substr(13)) : -1;
    const std::string hf = StrCat("model.layers.", layer, "."), blk = StrCat("blk.", layer, ".");
    const std::string relative = layer >= 0 ? spec.name.substr(hf.size()) : spec.name;
    std::string gguf_name;
    if (layer < 0) {
      gguf_name = names[spec.name];
    } else {
      for (const auto& [from, to] : DeepseekLayerNames()) {
        if (from == relative) gguf_name = blk + to;
      }
    }
    if (!gguf_name.empty()) {
      QUARK_ASSIGN_OR_RETURN(t, DequantizedGgufTensor(file, gguf_name));
    } else if (relative == "self_attn.kv_b_proj.weight") {
      QUARK_ASSIGN_OR_RETURN(at::Tensor k_b, DequantizedGgufTensor(file, blk + "attn_k_b.weight"));  // [H, kv_lora, nope]
      QUARK_ASSIGN_OR_RETURN(at::Tensor v_b, DequantizedGgufTensor(file, blk + "attn_v_b.weight"));  // [H, v, kv_lora]
      if (k_b.dim() != 3 || v_b.dim() != 3) return absl::InvalidArgumentError(StrCat(blk, "attn_k_b/attn_v_b are not 3-D"));
      t = at::cat({k_b.transpose(1, 2), v_b}, 1).reshape({-1, k_b.size(1)});
    } else if (relative.rfind("mlp.experts.", 0) == 0) {
      const size_t dot = relative.find('.', 12);
      const int64_t expert = std::stoll(relative.substr(12, dot - 12));
      const std::string proj = relative.substr(dot + 1, relative.find('_', dot) - dot - 1);  // gate, up, down
      const std::string key = StrCat(blk, "ffn_", proj, "_exps.weight");
      if (!stacked.count(key)) {
        QUARK_ASSIGN_OR_RETURN(stacked[key], DequantizedGgufTensor(file, key));
      }
      if (stacked[key].dim() != 3 || stacked[key].size(0) != c.n_routed_experts) {
        return absl::InvalidArgumentError(StrCat(file.path(), ": tensor \"", key, "\" does not hold ", c.n_routed_experts,
                                                 " experts"));
      }
      t = stacked[key].select(0, expert);
    } else {
      return absl::InternalError(StrCat("no GGUF name for ", spec.name));
    }
    if (t.sizes() != at::IntArrayRef(spec.shape)) {
      return absl::InvalidArgumentError(StrCat(file.path(), ": \"", spec.name, "\" reads as [", StrJoin(t.sizes(), ", "),
                                               "] but config.json implies [", StrJoin(spec.shape, ", "), "]"));
    }
    weights->Set(spec.name, t.contiguous());
  }
  return weights;
}

absl::StatusOr<checkpoint::ModelConfig> DeepseekModelConfigFromGguf(const GgufFile& file) {
  const std::string a = "deepseek2.";
  nlohmann::json root = {{"model_type", "deepseek_v3"}, {"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"},
                         {"hidden_act", "silu"}, {"rope_interleave", true}, {"num_nextn_predict_layers", 0},
                         {"torch_dtype", "float32"}};
  // config.json field <- GGUF key (without the architecture prefix).
  const std::pair<const char*, const char*> ints[] = {
      {"num_hidden_layers", "block_count"}, {"max_position_embeddings", "context_length"},
      {"hidden_size", "embedding_length"}, {"intermediate_size", "feed_forward_length"},
      {"num_attention_heads", "attention.head_count"}, {"kv_lora_rank", "attention.kv_lora_rank"},
      {"qk_rope_head_dim", "rope.dimension_count"}, {"v_head_dim", "attention.value_length_mla"},
      {"n_routed_experts", "expert_count"}, {"n_shared_experts", "expert_shared_count"},
      {"num_experts_per_tok", "expert_used_count"}, {"moe_intermediate_size", "expert_feed_forward_length"},
      {"n_group", "expert_group_count"}, {"topk_group", "expert_group_used_count"},
      {"first_k_dense_replace", "leading_dense_block_count"}, {"vocab_size", "vocab_size"}};
  for (const auto& [field, key] : ints) {
    QUARK_ASSIGN_OR_RETURN(root[field], file.GetInt(a + key));
  }
  root["num_key_value_heads"] = root["num_attention_heads"];
  QUARK_ASSIGN_OR_RETURN(const int64_t qk_head_dim, file.GetInt(a + "attention.key_length_mla"));
  root["qk_nope_head_dim"] = qk_head_dim - root["qk_rope_head_dim"].get<int64_t>();
  root["q_lora_rank"] = nullptr;
  if (file.Find(a + "attention.q_lora_rank")) {
    QUARK_ASSIGN_OR_RETURN(root["q_lora_rank"], file.GetInt(a + "attention.q_lora_rank"));
  }
  QUARK_ASSIGN_OR_RETURN(root["rms_norm_eps"], file.GetFloat(a + "attention.layer_norm_rms_epsilon"));
  QUARK_ASSIGN_OR_RETURN(root["rope_theta"], file.GetFloat(a + "rope.freq_base"));
  QUARK_ASSIGN_OR_RETURN(root["routed_scaling_factor"], file.GetFloat(a + "expert_weights_scale"));
  const Value* norm = file.Find(a + "expert_weights_norm");
  if (norm == nullptr) return absl::InvalidArgumentError(StrCat(file.path(), ": key ", a, "expert_weights_norm is missing"));
  root["norm_topk_prob"] = norm->number != 0;
  if (const Value* type = file.Find(a + "rope.scaling.type"); type != nullptr && type->text != "none") {
    if (type->text != "yarn") {
      return absl::InvalidArgumentError(StrCat(file.path(), ": ", a, "rope.scaling.type \"", type->text,
                                               "\" is not supported (yarn)"));
    }
    nlohmann::json yarn = {{"type", "yarn"}, {"beta_fast", 32.0}, {"beta_slow", 1.0}};
    QUARK_ASSIGN_OR_RETURN(yarn["factor"], file.GetFloat(a + "rope.scaling.factor"));
    QUARK_ASSIGN_OR_RETURN(yarn["original_max_position_embeddings"], file.GetInt(a + "rope.scaling.original_context_length"));
    QUARK_ASSIGN_OR_RETURN(const double multiplier, file.GetFloat(a + "rope.scaling.yarn_log_multiplier"));
    yarn["mscale"] = yarn["mscale_all_dim"] = multiplier / 0.1;
    root["rope_scaling"] = yarn;
  }
  for (const char* id : {"bos_token_id", "eos_token_id"}) {
    if (file.Find(StrCat("tokenizer.ggml.", id))) {
      QUARK_ASSIGN_OR_RETURN(root[id], file.GetInt(StrCat("tokenizer.ggml.", id)));
    }
  }
  root["tie_word_embeddings"] = file.FindTensor("output.weight") == nullptr;
  return checkpoint::ParseModelConfig(root.dump(), file.path());
}

}  // namespace quark::exporter::gguf
