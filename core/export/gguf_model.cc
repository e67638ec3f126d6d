#include "core/export/gguf_model.h"

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/export/gguf_dense.h"
#include "core/export/gguf_gemma.h"
#include "core/export/gguf_moe.h"

namespace quark::exporter::gguf {

at::Tensor PermuteRows(const at::Tensor& rows, int64_t heads) {
  // HF row h*D + i*D/2 + j (half i, pair j) -> llama.cpp row h*D + 2*j + i.
  std::vector<int64_t> shape = {heads, 2, rows.size(0) / heads / 2};
  for (int64_t d = 1; d < rows.dim(); ++d) shape.push_back(rows.size(d));
  return rows.reshape(shape).transpose(1, 2).reshape(rows.sizes()).contiguous();
}

at::Tensor UnpermuteRows(const at::Tensor& rows, int64_t heads) {
  std::vector<int64_t> shape = {heads, rows.size(0) / heads / 2, 2};
  for (int64_t d = 1; d < rows.dim(); ++d) shape.push_back(rows.size(d));
  return rows.reshape(shape).transpose(1, 2).reshape(rows.sizes()).contiguous();
}

absl::StatusOr<Metadata> BuildMetadata(const checkpoint::ModelConfig& config, const GgufVocab& vocab,
                                       const std::string& name, uint32_t file_type, bool quantized) {
  QUARK_ASSIGN_OR_RETURN(const std::string arch, GgufArchitecture(config));
  QUARK_RETURN_IF_ERROR(CheckVocabFits(vocab, config.vocab_size, "tokenizer"));
  Metadata md;
  auto u32 = [](int64_t v) { return Value::U32(static_cast<uint32_t>(v)); };
  md.emplace_back("general.architecture", Value::Str(arch));
  md.emplace_back("general.type", Value::Str("model"));
  md.emplace_back("general.name", Value::Str(name));
  md.emplace_back("general.alignment", Value::U32(static_cast<uint32_t>(kGgufAlignment)));
  md.emplace_back(arch + ".block_count", u32(config.num_hidden_layers));
  md.emplace_back(arch + ".context_length", u32(config.max_position_embeddings));
  md.emplace_back(arch + ".embedding_length", u32(config.hidden_size));
  md.emplace_back(arch + ".feed_forward_length", u32(config.intermediate_size));
  md.emplace_back(arch + ".attention.head_count", u32(config.num_attention_heads));
  md.emplace_back(arch + ".attention.head_count_kv", u32(config.num_key_value_heads));
  md.emplace_back(arch + ".attention.key_length", u32(config.head_dim));
  md.emplace_back(arch + ".attention.value_length", u32(config.head_dim));
  md.emplace_back(arch + ".rope.freq_base", Value::F32(static_cast<float>(config.rope_theta)));
  md.emplace_back(arch + ".rope.dimension_count", u32(config.head_dim));
  md.emplace_back(arch + ".attention.layer_norm_rms_epsilon", Value::F32(static_cast<float>(config.rms_norm_eps)));
  md.emplace_back(arch + ".vocab_size", u32(config.vocab_size));
  AppendDenseMetadata(config, arch, md);
  AppendGemmaMetadata(config, arch, md);
  AppendMoeMetadata(config, arch, md);
  if (config.rope_scaling) {  // linear only (GgufArchitecture refuses the others)
    md.emplace_back(arch + ".rope.scaling.type", Value::Str("linear"));
    md.emplace_back(arch + ".rope.scaling.factor", Value::F32(static_cast<float>(config.rope_scaling->factor)));
  }
  md.emplace_back("general.file_type", Value::U32(file_type));
  if (quantized) md.emplace_back("general.quantization_version", Value::U32(2));

  AppendTokenizerMetadata(config.vocab_size, config.bos_token_id, config.eos_token_id, vocab, md);
  return md;
}

void AppendTokenizerMetadata(int64_t vocab_size, int64_t bos_token_id, int64_t eos_token_id,
                             const GgufVocab& any_vocab, Metadata& md) {
  if (const BpeVocab* bpe = any_vocab.bpe()) {
    AppendBpeTokenizerMetadata(*bpe, md);
    return;
  }
  const SentencePieceVocab& vocab = *any_vocab.sentencepiece();
  auto u32 = [](int64_t v) { return Value::U32(static_cast<uint32_t>(v)); };
  std::vector<std::string> tokens;
  std::vector<double> scores, types;
  for (int64_t i = 0; i < vocab_size; ++i) {
    if (i < static_cast<int64_t>(vocab.pieces.size())) {
      tokens.push_back(vocab.pieces[i]);
      scores.push_back(vocab.scores[i]);
      types.push_back(GgufTokenType(vocab.types[i]));
    } else {
      tokens.push_back(StrCat("[PAD", i, "]"));
      scores.push_back(-10000.0);
      types.push_back(GgufTokenType(PieceType::kUnused));
    }
  }
  md.emplace_back("tokenizer.ggml.model", Value::Str("llama"));
  md.emplace_back("tokenizer.ggml.pre", Value::Str("default"));
  md.emplace_back("tokenizer.ggml.tokens", Value::Strs(std::move(tokens)));
  md.emplace_back("tokenizer.ggml.scores", Value::Numbers(ValueType::kFloat32, std::move(scores)));
  md.emplace_back("tokenizer.ggml.token_type", Value::Numbers(ValueType::kInt32, std::move(types)));
  // config.json's ids win over the tokenizer's, as the converter's SpecialVocab reads config.json.
  const int64_t bos = bos_token_id >= 0 ? bos_token_id : vocab.bos_id;
  const int64_t eos = eos_token_id >= 0 ? eos_token_id : vocab.eos_id;
  if (bos >= 0) md.emplace_back("tokenizer.ggml.bos_token_id", u32(bos));
  if (eos >= 0) md.emplace_back("tokenizer.ggml.eos_token_id", u32(eos));
  if (vocab.unk_id >= 0) md.emplace_back("tokenizer.ggml.unknown_token_id", u32(vocab.unk_id));
  if (vocab.pad_id >= 0) md.emplace_back("tokenizer.ggml.padding_token_id", u32(vocab.pad_id));
  md.emplace_back("tokenizer.ggml.add_bos_token", Value::Bool(true));
  md.emplace_back("tokenizer.ggml.add_eos_token", Value::Bool(false));
}

absl::StatusOr<checkpoint::ModelConfig> ModelConfigFromGguf(const GgufFile& file) {
  QUARK_ASSIGN_OR_RETURN(const std::string arch, file.GetString("general.architecture"));
  if (arch != "gemma2" && arch != "gemma3" && arch != "qwen3" && arch != "phi3" && arch != "llama" && arch != "qwen2" && arch != "qwen2moe" && arch != "qwen3moe") {
    return absl::InvalidArgumentError(StrCat("gguf: general.architecture \"", arch,
                                             "\" is not llama, qwen2, qwen2moe or qwen3moe"));
  }
  checkpoint::ModelConfig c;
  c.model_type = arch;  // qwen3 / phi3: the round trip below sets their q/k norms / fused layout from the name
  QUARK_ASSIGN_OR_RETURN(c.num_hidden_layers, file.GetInt(arch + ".block_count"));
  QUARK_ASSIGN_OR_RETURN(c.max_position_embeddings, file.GetInt(arch + ".context_length"));
  QUARK_ASSIGN_OR_RETURN(c.hidden_size, file.GetInt(arch + ".embedding_length"));
  QUARK_ASSIGN_OR_RETURN(c.intermediate_size, file.GetInt(arch + ".feed_forward_length"));
  QUARK_ASSIGN_OR_RETURN(c.num_attention_heads, file.GetInt(arch + ".attention.head_count"));
  c.num_key_value_heads = c.num_attention_heads;
  if (file.Find(arch + ".attention.head_count_kv")) {
    QUARK_ASSIGN_OR_RETURN(c.num_key_value_heads, file.GetInt(arch + ".attention.head_count_kv"));
  }
  c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  if (file.Find(arch + ".attention.key_length")) {
    QUARK_ASSIGN_OR_RETURN(c.head_dim, file.GetInt(arch + ".attention.key_length"));
  }
  QUARK_ASSIGN_OR_RETURN(c.rms_norm_eps, file.GetFloat(arch + ".attention.layer_norm_rms_epsilon"));
  if (file.Find(arch + ".rope.freq_base")) {
    QUARK_ASSIGN_OR_RETURN(c.rope_theta, file.GetFloat(arch + ".rope.freq_base"));
  }
  if (const Value* scaling = file.Find(arch + ".rope.scaling.type"); scaling && scaling->text != "none") {
    if (scaling->text != "linear") {
      return absl::InvalidArgumentError(StrCat("gguf: ", arch, ".rope.scaling.type \"", scaling->text,
                                               "\" is not supported (linear)"));
    }
    checkpoint::RopeScaling rope;
    rope.rope_type = "linear";
    QUARK_ASSIGN_OR_RETURN(rope.factor, file.GetFloat(arch + ".rope.scaling.factor"));
    c.rope_scaling = rope;
  }
  const TensorInfo* embed = file.FindTensor("token_embd.weight");
  if (embed == nullptr || embed->ne.size() != 2) {
    return absl::InvalidArgumentError("gguf: tensor token_embd.weight is missing or not 2-D");
  }
  c.vocab_size = embed->ne[1];
  c.tie_word_embeddings = file.FindTensor("output.weight") == nullptr;
  c.attention_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;
  c.o_proj_bias = file.FindTensor("blk.0.attn_output.bias") != nullptr;
  c.mlp_bias = file.FindTensor("blk.0.ffn_up.bias") != nullptr;
  if (arch == "gemma2" || arch == "gemma3") QUARK_RETURN_IF_ERROR(GemmaConfigFromGguf(file, arch, c));
  if (IsMoeGgufArchitecture(file, arch)) QUARK_RETURN_IF_ERROR(MoeConfigFromGguf(file, arch, c));
  if (file.Find("tokenizer.ggml.bos_token_id")) {
    QUARK_ASSIGN_OR_RETURN(c.bos_token_id, file.GetInt("tokenizer.ggml.bos_token_id"));
  }
  if (file.Find("tokenizer.ggml.eos_token_id")) {
    QUARK_ASSIGN_OR_RETURN(c.eos_token_id, file.GetInt("tokenizer.ggml.eos_token_id"));
  }
  c.torch_dtype = "float32";
  // Round trip through config.json's parser: the same checks (positive sizes, divisible heads) as an HF folder.
  return checkpoint::ParseModelConfig(checkpoint::ModelConfigToJson(c), file.path());
}

}  // namespace quark::exporter::gguf
