#include "core/checkpoint/gpt_oss_layout.h"

#include <set>

#include "core/base/strings.h"

namespace quark::checkpoint {

std::vector<LinearSpec> GptOssLayerLinears(const GptOssConfig& c) {
  const ModelConfig& b = c.base;
  const int64_t h = b.hidden_size, q = b.num_attention_heads * b.head_dim, kv = b.num_key_value_heads * b.head_dim;
  const bool bias = b.attention_bias;
  std::vector<LinearSpec> out = {{"self_attn.q_proj", q, h, bias, "input_layernorm"},
                                 {"self_attn.k_proj", kv, h, bias, "input_layernorm"},
                                 {"self_attn.v_proj", kv, h, bias, "input_layernorm"},
                                 {"self_attn.o_proj", h, q, bias, "self_attn"}};
  const int64_t inter = b.intermediate_size;
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    const std::string expert = StrCat("mlp.experts.", e);
    out.push_back({expert + ".gate_up_proj", 2 * inter, h, true, expert, /*routed=*/true});
    out.push_back({expert + ".down_proj", h, inter, true, expert + ".act_fn", /*routed=*/true});
  }
  return out;
}

std::vector<std::string> GptOssGptqModules() {
  return {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.experts.*.gate_up_proj",
          "mlp.experts.*.down_proj"};
}

std::vector<TensorSpec> GptOssLayerNorms(const GptOssConfig& c, int64_t layer) {
  const std::string prefix = LayerPrefix(c.base, layer);
  return {{prefix + "input_layernorm.weight", {c.base.hidden_size}, TensorRole::kNormWeight},
          {prefix + "post_attention_layernorm.weight", {c.base.hidden_size}, TensorRole::kNormWeight}};
}

// Router, sinks and the fused experts are never quantizable modules: kRouterWeight (seeded like a weight by the
// synthetic maker, so that biases and sinks are not zero in tests).
std::vector<TensorSpec> GptOssFloatTensors(const GptOssConfig& c, int64_t layer) {
  const std::string prefix = LayerPrefix(c.base, layer);
  const int64_t experts = c.num_local_experts;
  return {{prefix + "self_attn.sinks", {c.base.num_attention_heads}, TensorRole::kRouterWeight},
          {prefix + "mlp.router.weight", {experts, c.base.hidden_size}, TensorRole::kRouterWeight},
          {prefix + "mlp.router.bias", {experts}, TensorRole::kRouterWeight}};
}

std::vector<TensorSpec> GptOssExpertTensors(const GptOssConfig& c, int64_t layer) {
  const std::string prefix = LayerPrefix(c.base, layer) + "mlp.experts.";
  const int64_t e = c.num_local_experts, h = c.base.hidden_size, inter = c.base.intermediate_size;
  return {{prefix + "gate_up_proj", {e, h, 2 * inter}, TensorRole::kRouterWeight},
          {prefix + "gate_up_proj_bias", {e, 2 * inter}, TensorRole::kRouterWeight},
          {prefix + "down_proj", {e, inter, h}, TensorRole::kRouterWeight},
          {prefix + "down_proj_bias", {e, h}, TensorRole::kRouterWeight}};
}

std::vector<TensorSpec> GptOssModelTensors(const GptOssConfig& c) {
  const ModelConfig& b = c.base;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {b.vocab_size, b.hidden_size}, TensorRole::kEmbedding});
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) {
    const std::string prefix = LayerPrefix(b, i);
    for (const LinearSpec& l : GptOssLayerLinears(c)) {
      if (l.routed) continue;  // the experts are stored fused (GptOssExpertTensors)
      out.push_back({prefix + l.relative_name + ".weight", {l.out_features, l.in_features}, TensorRole::kLinearWeight});
      // kRouterWeight: seeded by the synthetic maker (a zero bias would hide how it is applied).
      if (l.has_bias) out.push_back({prefix + l.relative_name + ".bias", {l.out_features}, TensorRole::kRouterWeight});
    }
    for (TensorSpec& t : GptOssLayerNorms(c, i)) out.push_back(std::move(t));
    for (TensorSpec& t : GptOssFloatTensors(c, i)) out.push_back(std::move(t));
    for (TensorSpec& t : GptOssExpertTensors(c, i)) out.push_back(std::move(t));
  }
  out.push_back({"model.norm.weight", {b.hidden_size}, TensorRole::kNormWeight});
  if (!b.tie_word_embeddings) out.push_back({"lm_head.weight", {b.vocab_size, b.hidden_size}, TensorRole::kLinearWeight});
  return out;
}

std::vector<TensorSpec> GptOssSplitModelTensors(const GptOssConfig& c) {
  const std::vector<LinearSpec> linears = GptOssLayerLinears(c);
  std::vector<TensorSpec> out;
  for (TensorSpec& spec : GptOssModelTensors(c)) {
    if (!IsGptOssFusedExpertTensor(spec.name)) {
      out.push_back(std::move(spec));
      continue;
    }
    constexpr std::string_view kGateUp = "mlp.experts.gate_up_proj";
    if (spec.name.size() < kGateUp.size() || spec.name.compare(spec.name.size() - kGateUp.size(), kGateUp.size(), kGateUp) != 0) {
      continue;  // one pass per layer, at its gate_up_proj
    }
    const std::string prefix = spec.name.substr(0, spec.name.size() - kGateUp.size());
    for (const LinearSpec& l : linears) {
      if (!l.routed) continue;
      out.push_back({prefix + l.relative_name + ".weight", {l.out_features, l.in_features}, TensorRole::kLinearWeight});
      out.push_back({prefix + l.relative_name + ".bias", {l.out_features}, TensorRole::kLinearBias});
    }
  }
  return out;
}

std::optional<GptOssExpertSlice> GptOssExpertSliceOf(const std::string& name) {
  // ... "mlp.experts." E "." proj "." kind
  constexpr std::string_view kExperts = ".mlp.experts.";
  const size_t at = name.rfind(kExperts);
  if (at == std::string::npos) return std::nullopt;
  const size_t index_start = at + kExperts.size();
  const size_t index_end = name.find('.', index_start);
  if (index_end == std::string::npos || index_end == index_start || index_end - index_start > 9) return std::nullopt;
  int64_t expert = 0;
  for (size_t i = index_start; i < index_end; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    expert = expert * 10 + (name[i] - '0');
  }
  const std::string rest = name.substr(index_end + 1);  // "gate_up_proj.weight"
  const std::string fused = name.substr(0, index_start);  // "...mlp.experts."
  for (const char* proj : {"gate_up_proj", "down_proj"}) {
    if (rest == StrCat(proj, ".weight")) return GptOssExpertSlice{fused + proj, expert, true};
    if (rest == StrCat(proj, ".bias")) return GptOssExpertSlice{StrCat(fused, proj, "_bias"), expert, false};
  }
  return std::nullopt;
}

bool IsGptOssFusedExpertTensor(const std::string& name) {
  constexpr std::string_view kExperts = ".mlp.experts.";
  const size_t at = name.rfind(kExperts);
  if (at == std::string::npos) return false;
  static const std::set<std::string> kFused = {"gate_up_proj", "gate_up_proj_bias", "gate_up_proj_blocks",
                                               "gate_up_proj_scales", "down_proj", "down_proj_bias",
                                               "down_proj_blocks", "down_proj_scales"};
  return kFused.count(name.substr(at + kExperts.size())) > 0;
}

namespace {

absl::Status CheckStoredShape(const CheckpointReader& reader, const std::string& name, const std::vector<int64_t>& shape) {
  auto ref = reader.Get(name);
  if (!ref.ok()) return ref.status();
  if (ref->info->shape == shape) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat("tensor \"", name, "\" has shape [", StrJoin(ref->info->shape, ", "),
                                           "] but config.json implies [", StrJoin(shape, ", "), "]"));
}

}  // namespace

absl::Status CheckGptOssFusedSource(const GptOssConfig& c, const CheckpointReader& reader, const std::string& name) {
  const std::optional<GptOssExpertSlice> slice = GptOssExpertSliceOf(name);
  if (!slice) return absl::NotFoundError(StrCat("tensor \"", name, "\" is not a gpt-oss expert tensor"));
  const int64_t e = c.num_local_experts, h = c.base.hidden_size, inter = c.base.intermediate_size;
  const bool gate_up = slice->fused.find("gate_up_proj") != std::string::npos;
  const int64_t out = gate_up ? 2 * inter : h, in = gate_up ? h : inter;
  if (!slice->transposed) return CheckStoredShape(reader, slice->fused, {e, out});  // biases are float in both forms
  if (reader.Has(slice->fused)) return CheckStoredShape(reader, slice->fused, {e, in, out});
  if (reader.Has(slice->fused + "_blocks") && reader.Has(slice->fused + "_scales")) {
    if (in % 32 != 0) {
      return absl::InvalidArgumentError(StrCat("tensor \"", slice->fused, "_blocks\": MXFP4 blocks of 32 need ", in,
                                               " input features to be a multiple of 32"));
    }
    if (auto s = CheckStoredShape(reader, slice->fused + "_blocks", {e, out, in / 32, 16}); !s.ok()) return s;
    return CheckStoredShape(reader, slice->fused + "_scales", {e, out, in / 32});
  }
  return absl::NotFoundError(StrCat("tensor \"", name, "\" is missing from ", reader.location(), ", and so is its fused \"",
                                    slice->fused, "\" (or its MXFP4 _blocks and _scales)"));
}

}  // namespace quark::checkpoint
