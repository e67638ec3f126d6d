#include "core/runtime/moe_synthetic.h"

#include "core/base/strings.h"

namespace quark::runtime {
namespace {

struct MoeShape {
  const char* arch;
  const char* name;
  int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, max_positions;
  int64_t experts, top_k, moe_intermediate, shared_intermediate;
  bool norm_topk_prob;
  double rope_theta, rms_eps;
  int64_t bos, eos;
  bool tied;
};

// The real shapes are the released configs (Mixtral-8x7B-v0.1, Qwen1.5-MoE-A2.7B, Qwen3-30B-A3B). The tiny ones
// keep 8 experts with top-2 so that routing is sparse; tiny qwen3_moe gives head_dim apart from hidden / heads
// (32 x 4 heads = 128 > hidden 64), as Qwen3 does.
constexpr MoeShape kMoeShapes[] = {
    {"mixtral", "tiny", 64, 96, 2, 4, 2, 16, 512, 512, 8, 2, 96, 0, true, 1e6, 1e-5, 1, 2, true},
    {"mixtral", "mixtral-8x7b", 4096, 14336, 32, 32, 8, 128, 32000, 32768, 8, 2, 14336, 0, true, 1e6, 1e-5, 1, 2, false},
    {"qwen2_moe", "tiny", 64, 128, 2, 4, 4, 16, 512, 512, 8, 2, 64, 128, false, 1e6, 1e-6, 1, 2, true},
    {"qwen2_moe", "qwen1.5-moe-a2.7b", 2048, 5632, 24, 16, 16, 128, 151936, 8192, 60, 4, 1408, 5632, false, 1e6, 1e-6,
     151643, 151643, false},
    {"qwen3_moe", "tiny", 64, 128, 2, 4, 2, 32, 512, 512, 8, 2, 64, 0, true, 1e6, 1e-6, 1, 2, true},
    {"qwen3_moe", "qwen3-30b-a3b", 2048, 6144, 48, 32, 4, 128, 151936, 40960, 128, 8, 768, 0, true, 1e6, 1e-6, 151643,
     151645, false},
};

}  // namespace

std::vector<std::string> MoeSyntheticShapes(const std::string& arch) {
  std::vector<std::string> names;
  for (const MoeShape& s : kMoeShapes) {
    if (arch == s.arch) names.push_back(s.name);
  }
  return names;
}

absl::StatusOr<checkpoint::ModelConfig> MoeSyntheticConfig(const std::string& arch, const std::string& shape,
                                                           const std::string& torch_dtype) {
  for (const MoeShape& s : kMoeShapes) {
    if (arch != s.arch || shape != s.name) continue;
    checkpoint::ModelConfig c;
    c.model_type = arch;
    c.family = checkpoint::ArchFamily::kMoe;
    c.hidden_size = s.hidden;
    c.intermediate_size = s.intermediate;
    c.num_hidden_layers = s.layers;
    c.num_attention_heads = s.heads;
    c.num_key_value_heads = s.kv_heads;
    c.head_dim = s.head_dim;
    c.vocab_size = s.vocab;
    c.max_position_embeddings = s.max_positions;
    c.rms_norm_eps = s.rms_eps;
    c.rope_theta = s.rope_theta;
    c.bos_token_id = s.bos;
    c.eos_token_id = s.eos;
    c.torch_dtype = torch_dtype;
    c.tie_word_embeddings = s.tied;
    c.num_experts = s.experts;
    c.num_experts_per_tok = s.top_k;
    c.moe_intermediate_size = s.moe_intermediate;
    c.shared_expert_intermediate_size = s.shared_intermediate;
    c.norm_topk_prob = s.norm_topk_prob;
    c.attention_bias = arch == "qwen2_moe";  // q/k/v only
    c.qk_norm = arch == "qwen3_moe";
    return c;
  }
  return absl::InvalidArgumentError(StrCat("shape \"", shape, "\" is not known for arch ", arch, " (known: ",
                                           StrJoin(MoeSyntheticShapes(arch), ", "), ")"));
}

}  // namespace quark::runtime
