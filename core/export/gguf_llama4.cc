#include "core/export/gguf_llama4.h"

#include <cmath>
#include <map>
#include <vector>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/gguf_model.h"
#include "core/export/gguf_mxfp4.h"
#include "core/export/gguf_llama4_plan.h"
#include "core/export/gguf_whole_file.h"

namespace quark::exporter::gguf {
namespace {

using checkpoint::Llama4Config;

constexpr char kLlama4Arch[] = "llama4";
// Llama 3 rope_scaling's parameters, for the engine's read-back (llama.cpp reads only rope_freqs).
constexpr char kLlama3Keys[] = "quark.llama3_rope.";


// The converter's rope_freqs for Llama 3 rope_scaling: the factor llama.cpp divides each pair's frequency by.
at::Tensor RopeFreqs(const checkpoint::ModelConfig& b) {
  const checkpoint::RopeScaling& s = *b.rope_scaling;
  const int64_t dim = b.head_dim;
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < dim; i += 2) {
    const double freq = 1.0 / std::pow(b.rope_theta, static_cast<double>(i) / dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(static_cast<float>(s.factor));
    } else {
      const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      factors.push_back(static_cast<float>(1 / ((1 - smooth) / s.factor + smooth)));
    }
  }
  return at::tensor(factors, at::kFloat);
}

Metadata Llama4Metadata(const Llama4Config& c, const GgufVocab& vocab, GgmlType type, bool mxfp4_experts) {
  const checkpoint::ModelConfig& b = c.base;
  const std::string a = kLlama4Arch;
  auto u32 = [](int64_t v) { return Value::U32(static_cast<uint32_t>(v)); };
  auto f32 = [](double v) { return Value::F32(static_cast<float>(v)); };
  Metadata md = WholeFileMetadata(a, "llama4_text", b, b.num_key_value_heads);
  const std::pair<const char*, int64_t> ints[] = {
      {".feed_forward_length", c.intermediate_size_mlp}, {".expert_count", c.num_local_experts},
      {".expert_used_count", c.num_experts_per_tok},     {".attention.key_length", b.head_dim},
      {".attention.value_length", b.head_dim},           {".vocab_size", b.vocab_size},
      {".rope.dimension_count", b.head_dim},             {".interleave_moe_layer_step", Llama4MoeStep(c)},
      {".expert_feed_forward_length", b.intermediate_size}};
  for (const auto& [key, value] : ints) md.emplace_back(a + key, u32(value));
  if (b.rope_scaling && b.rope_scaling->rope_type == "linear") {
    md.emplace_back(a + ".rope.scaling.type", Value::Str("linear"));
    md.emplace_back(a + ".rope.scaling.factor", f32(b.rope_scaling->factor));
  }
  if (b.rope_scaling && b.rope_scaling->rope_type == "llama3") {
    const checkpoint::RopeScaling& r = *b.rope_scaling;
    md.emplace_back(StrCat(kLlama3Keys, "factor"), f32(r.factor));
    md.emplace_back(StrCat(kLlama3Keys, "low_freq_factor"), f32(r.low_freq_factor));
    md.emplace_back(StrCat(kLlama3Keys, "high_freq_factor"), f32(r.high_freq_factor));
    md.emplace_back(StrCat(kLlama3Keys, "original_max_position_embeddings"), u32(r.original_max_position_embeddings));
  }
  AppendWholeFileTail(b, vocab, type, mxfp4_experts, md);
  return md;
}


// Every GGUF tensor of decoder layer `i` in the plan's order (PlanLlama4Gguf), typed and shape-checked by the plan.
absl::Status AddLayer(const Llama4Config& c, const runtime::WeightSource& weights, int64_t i,
                      std::vector<GgufTensorData>& out) {
  const std::string hf = checkpoint::LayerPrefix(c.base, i), blk = StrCat("blk.", i, ".");
  for (const auto& [from, to] : Llama4LayerGgufNames(c, i)) {
    QUARK_ASSIGN_OR_RETURN(at::Tensor t, weights.Get(hf + from, at::kFloat));
    out.push_back({blk + to, t.contiguous()});
  }
  if (!c.IsMoeLayer(i)) return absl::OkStatus();
  for (const char* proj : {"gate", "up", "down"}) {
    std::vector<at::Tensor> stack;
    for (int64_t e = 0; e < c.num_local_experts; ++e) {
      QUARK_ASSIGN_OR_RETURN(at::Tensor t, weights.Get(StrCat(hf, "feed_forward.experts.", e, ".", proj, "_proj.weight"),
                                                       at::kFloat));
      stack.push_back(t);
    }
    out.push_back({StrCat(blk, "ffn_", proj, "_exps.weight"), at::stack(stack).contiguous()});  // [E, out, in]
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteLlama4Gguf(const Llama4Config& c, const runtime::WeightSource& weights,
                             const GgufVocab& vocab, GgmlType type, const std::set<std::string>& mxfp4,
                             const std::string& path) {
  QUARK_ASSIGN_OR_RETURN(const std::vector<TensorInfo> planned, PlanLlama4Gguf(c, type, mxfp4));
  const checkpoint::ModelConfig& b = c.base;
  QUARK_RETURN_IF_ERROR(CheckVocabFits(vocab, b.vocab_size, "gguf llama4"));
  std::vector<GgufTensorData> tensors;
  try {
    QUARK_ASSIGN_OR_RETURN(at::Tensor embed, weights.Get("model.embed_tokens.weight", at::kFloat));
    tensors.push_back({"token_embd.weight", embed.contiguous()});
    if (b.rope_scaling && b.rope_scaling->rope_type == "llama3") tensors.push_back({"rope_freqs.weight", RopeFreqs(b)});
    for (int64_t i = 0; i < b.num_hidden_layers; ++i) QUARK_RETURN_IF_ERROR(AddLayer(c, weights, i, tensors));
    QUARK_ASSIGN_OR_RETURN(at::Tensor norm, weights.Get("model.norm.weight", at::kFloat));
    tensors.push_back({"output_norm.weight", norm.contiguous()});
    if (!b.tie_word_embeddings) {
      QUARK_ASSIGN_OR_RETURN(at::Tensor head, weights.Get("lm_head.weight", at::kFloat));
      tensors.push_back({"output.weight", head.contiguous()});
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(StrCat("gguf llama4: ", e.what_without_backtrace()));
  }
  QUARK_RETURN_IF_ERROR(TakePlannedTypes("llama4", planned, tensors));
  bool any_mxfp4 = false;
  for (const GgufTensorData& t : tensors) any_mxfp4 |= t.type == kGgmlMxfp4;
  return WriteGgufTensors(Llama4Metadata(c, vocab, type, any_mxfp4), tensors, path);
}

absl::StatusOr<std::shared_ptr<runtime::TensorMapWeightSource>> Llama4WeightsFromGguf(const Llama4Config& c,
                                                                                      const GgufFile& file) {
  const checkpoint::ModelConfig& b = c.base;
  std::map<std::string, std::string> plain = {{"model.embed_tokens.weight", "token_embd.weight"},
                                              {"model.norm.weight", "output_norm.weight"},
                                              {"lm_head.weight", "output.weight"}};
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) {
    for (const auto& [hf, gg] : Llama4LayerGgufNames(c, i)) plain[checkpoint::LayerPrefix(b, i) + hf] = StrCat("blk.", i, ".", gg);
  }
  auto weights = std::make_shared<runtime::TensorMapWeightSource>();
  std::map<std::string, at::Tensor> stacked;  // GGUF expert stacks, read once each
  for (const checkpoint::TensorSpec& spec : checkpoint::Llama4ModelTensors(c)) {
    at::Tensor t;
    if (auto it = plain.find(spec.name); it != plain.end()) {
      QUARK_ASSIGN_OR_RETURN(t, DequantizedGgufTensor(file, it->second));
    } else {
      // "model.layers.N.feed_forward.experts.E.<gate|up|down>_proj.weight"
      const size_t layer_end = spec.name.find('.', 13), experts = spec.name.find("experts.");
      if (experts == std::string::npos) return absl::InternalError(StrCat("no GGUF name for ", spec.name));
      const size_t expert_end = spec.name.find('.', experts + 8);
      const int64_t expert = std::stoll(spec.name.substr(experts + 8, expert_end - experts - 8));
      const std::string proj = spec.name.substr(expert_end + 1, spec.name.find('_', expert_end) - expert_end - 1);
      const std::string key = StrCat("blk.", spec.name.substr(13, layer_end - 13), ".ffn_", proj, "_exps.weight");
      if (!stacked.count(key)) {
        QUARK_ASSIGN_OR_RETURN(stacked[key], DequantizedGgufTensor(file, key));
      }
      if (stacked[key].dim() != 3 || stacked[key].size(0) != c.num_local_experts) {
        return absl::InvalidArgumentError(StrCat(file.path(), ": tensor \"", key, "\" does not hold ",
                                                 c.num_local_experts, " experts"));
      }
      t = stacked[key].select(0, expert);
    }
    if (t.sizes() != at::IntArrayRef(spec.shape)) {
      return absl::InvalidArgumentError(StrCat(file.path(), ": \"", spec.name, "\" reads as [", StrJoin(t.sizes(), ", "),
                                               "] but config.json implies [", StrJoin(spec.shape, ", "), "]"));
    }
    weights->Set(spec.name, t.contiguous());
  }
  return weights;
}

absl::StatusOr<checkpoint::ModelConfig> Llama4ModelConfigFromGguf(const GgufFile& file) {
  const std::string a = StrCat(kLlama4Arch, ".");
  Llama4Config c;
  checkpoint::ModelConfig& b = c.base;
  b.model_type = "llama4_text";
  b.family = checkpoint::ArchFamily::kLlama4;
  b.torch_dtype = "float32";
  int64_t step = 0;
  const std::pair<int64_t*, const char*> ints[] = {
      {&b.hidden_size, "embedding_length"}, {&b.intermediate_size, "expert_feed_forward_length"},
      {&c.intermediate_size_mlp, "feed_forward_length"}, {&b.num_hidden_layers, "block_count"},
      {&b.num_attention_heads, "attention.head_count"}, {&b.num_key_value_heads, "attention.head_count_kv"},
      {&b.head_dim, "attention.key_length"}, {&b.max_position_embeddings, "context_length"},
      {&c.num_local_experts, "expert_count"}, {&c.num_experts_per_tok, "expert_used_count"},
      {&b.vocab_size, "vocab_size"}, {&step, "interleave_moe_layer_step"}};
  for (const auto& [field, key] : ints) {
    QUARK_ASSIGN_OR_RETURN(*field, file.GetInt(a + key));
  }
  if (step <= 0) return absl::InvalidArgumentError(StrCat(file.path(), ": ", a, "interleave_moe_layer_step is 0"));
  QUARK_ASSIGN_OR_RETURN(b.rms_norm_eps, file.GetFloat(a + "attention.layer_norm_rms_epsilon"));
  QUARK_ASSIGN_OR_RETURN(b.rope_theta, file.GetFloat(a + "rope.freq_base"));
  for (int64_t i = 0; i < b.num_hidden_layers; ++i) {
    c.moe_layers.push_back((i + 1) % step == 0);
    c.rope_layers.push_back((i + 1) % kLlama4NoRopeStep != 0);
  }
  c.chunked_layers = c.rope_layers;
  c.attention_chunk_size = kLlama4Chunk;
  c.floor_scale = kLlama4FloorScale;
  c.attn_scale = kLlama4AttnScale;
  c.attn_temperature_tuning = true;
  c.use_qk_norm = c.num_local_experts != kLlama4MaverickExperts;
  if (const Value* type = file.Find(a + "rope.scaling.type"); type != nullptr && type->text == "linear") {
    checkpoint::RopeScaling linear;
    linear.rope_type = "linear";
    QUARK_ASSIGN_OR_RETURN(linear.factor, file.GetFloat(a + "rope.scaling.factor"));
    b.rope_scaling = linear;
  }
  if (file.FindTensor("rope_freqs.weight") != nullptr) {
    checkpoint::RopeScaling llama3;
    llama3.rope_type = "llama3";
    QUARK_ASSIGN_OR_RETURN(llama3.factor, file.GetFloat(StrCat(kLlama3Keys, "factor")));
    QUARK_ASSIGN_OR_RETURN(llama3.low_freq_factor, file.GetFloat(StrCat(kLlama3Keys, "low_freq_factor")));
    QUARK_ASSIGN_OR_RETURN(llama3.high_freq_factor, file.GetFloat(StrCat(kLlama3Keys, "high_freq_factor")));
    QUARK_ASSIGN_OR_RETURN(llama3.original_max_position_embeddings,
                           file.GetInt(StrCat(kLlama3Keys, "original_max_position_embeddings")));
    b.rope_scaling = llama3;
  }
  for (const auto& [field, key] : {std::pair{&b.bos_token_id, "tokenizer.ggml.bos_token_id"},
                                   std::pair{&b.eos_token_id, "tokenizer.ggml.eos_token_id"}}) {
    if (file.Find(key)) {
      QUARK_ASSIGN_OR_RETURN(*field, file.GetInt(key));
    }
  }
  b.tie_word_embeddings = file.FindTensor("output.weight") == nullptr;
  return checkpoint::ParseModelConfig(checkpoint::Llama4ConfigToJson(c), file.path());
}

}  // namespace quark::exporter::gguf

namespace quark::exporter {

absl::StatusOr<std::unique_ptr<ModelExporter>> CreateLlama4GgufExporter(const std::string& model_dir,
                                                                        const std::string& output_file,
                                                                        const LayerPlan& plan,
                                                                        const GgufExportOptions& options) {
  QUARK_ASSIGN_OR_RETURN(gguf::WholeFileModel in, gguf::OpenWholeFileModel(model_dir, options));
  if (!in.model.llama4) return absl::InternalError(StrCat(model_dir, ": not a llama4_text model"));
  QUARK_RETURN_IF_ERROR(gguf::CheckLlama4Gguf(*in.model.llama4));
  return gguf::CreateWholeFileGgufExporter(
      output_file, plan,
      [config = *in.model.llama4, vocab = std::move(in.vocab), type = in.type](const runtime::WeightSource& weights,
                                                               const std::set<std::string>& mxfp4,
                                                               const std::string& path) {
        return gguf::WriteLlama4Gguf(config, weights, vocab, type, mxfp4, path);
      });
}

}  // namespace quark::exporter
