#include "core/runtime/llama4_synthetic.h"

#include "core/base/strings.h"

namespace quark::runtime {
namespace {

struct Llama4Shape {
  const char* name;
  int64_t hidden, intermediate, intermediate_mlp, layers, heads, kv_heads, head_dim, vocab, max_positions;
  int64_t experts, top_k, moe_step, first_moe, no_rope_interval, chunk;
  bool qk_norm;
  double floor_scale;
  // Llama 3 rope scaling (factor 0 = none)
  double factor, low_freq, high_freq;
  int64_t original_positions;
  int64_t bos, eos;
};

// llama-4-scout / -maverick: the text_config of meta-llama/Llama-4-{Scout-17B-16E,Maverick-17B-128E}-Instruct.
// tiny: MoE from layer 1 on (moe_step 1, first_moe 1), layer 2 NoPE (interval 3).
constexpr Llama4Shape kShapes[] = {
    {"tiny", 64, 32, 96, 4, 4, 2, 16, 512, 2048, 4, 1, 1, 1, 3, 8, true, 4, 8.0, 1.0, 4.0, 64, 0, 1},
    {"llama-4-scout", 5120, 8192, 16384, 48, 40, 8, 128, 202048, 10485760, 16, 1, 1, 0, 4, 8192, true, 8192, 16.0, 1.0,
     1.0, 8192, 200000, 200001},
    {"llama-4-scout-2l", 5120, 8192, 16384, 2, 40, 8, 128, 202048, 10485760, 16, 1, 1, 0, 4, 8192, true, 8192, 16.0, 1.0,
     1.0, 8192, 200000, 200001},
    {"llama-4-maverick", 5120, 8192, 16384, 48, 40, 8, 128, 202048, 1048576, 128, 1, 2, 1, 4, 8192, false, 8192, 0, 0, 0, 0,
     200000, 200001},
};

}  // namespace

std::vector<std::string> Llama4SyntheticShapes(const std::string& arch) {
  std::vector<std::string> names;
  if (arch != "llama4" && arch != "llama4_text") return names;
  for (const Llama4Shape& s : kShapes) names.push_back(s.name);
  return names;
}

absl::StatusOr<checkpoint::Llama4Config> Llama4SyntheticConfig(const std::string& shape, const std::string& torch_dtype) {
  for (const Llama4Shape& s : kShapes) {
    if (shape != s.name) continue;
    checkpoint::Llama4Config c;
    checkpoint::ModelConfig& b = c.base;
    b.model_type = "llama4_text";
    b.family = checkpoint::ArchFamily::kLlama4;
    b.hidden_size = s.hidden;
    b.intermediate_size = s.intermediate;
    b.num_hidden_layers = s.layers;
    b.num_attention_heads = s.heads;
    b.num_key_value_heads = s.kv_heads;
    b.head_dim = s.head_dim;
    b.vocab_size = s.vocab;
    b.max_position_embeddings = s.max_positions;
    b.rms_norm_eps = 1e-5;
    b.rope_theta = 500000.0;
    if (s.factor > 0) b.rope_scaling = checkpoint::RopeScaling{"llama3", s.factor, s.low_freq, s.high_freq, s.original_positions};
    b.bos_token_id = s.bos;
    b.eos_token_id = s.eos;
    b.torch_dtype = torch_dtype;
    c.intermediate_size_mlp = s.intermediate_mlp;
    c.num_local_experts = s.experts;
    c.num_experts_per_tok = s.top_k;
    for (int64_t i = 0; i < s.layers; ++i) {
      c.moe_layers.push_back(i >= s.first_moe && (i - s.first_moe) % s.moe_step == 0);
      c.rope_layers.push_back((i + 1) % s.no_rope_interval != 0);
    }
    c.chunked_layers = c.rope_layers;
    c.attention_chunk_size = s.chunk;
    c.use_qk_norm = s.qk_norm;
    c.floor_scale = s.floor_scale;
    return c;
  }
  return absl::InvalidArgumentError(StrCat("shape \"", shape, "\" is not known for arch llama4 (known: ",
                                           StrJoin(Llama4SyntheticShapes("llama4"), ", "), ")"));
}

}  // namespace quark::runtime
