#include "core/runtime/gpt_oss_synthetic.h"

#include "core/base/strings.h"

namespace quark::runtime {
namespace {

struct GptOssShape {
  const char* name;
  int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, experts, top_k, window;
  int64_t original_positions;  // YaRN's; max_position_embeddings = 32 x this (factor 32, as released)
  int64_t eos;
};

// gpt-oss-20b / gpt-oss-120b: openai's config.json as HF ships it (rope_theta 150000, YaRN factor 32 over 4096,
// beta_fast 32, beta_slow 1, truncate false, rms_norm_eps 1e-5, swiglu_limit 7, attention_bias true).
constexpr GptOssShape kGptOssShapes[] = {
    {"tiny", 64, 32, 3, 6, 2, 16, 512, 8, 2, 4, 64, 1},
    {"gpt-oss-20b", 2880, 2880, 24, 64, 8, 64, 201088, 32, 4, 128, 4096, 200002},
    {"gpt-oss-20b-2l", 2880, 2880, 2, 64, 8, 64, 201088, 32, 4, 128, 4096, 200002},
    {"gpt-oss-120b", 2880, 2880, 36, 64, 8, 64, 201088, 128, 4, 128, 4096, 200002},
    {"gpt-oss-120b-2l", 2880, 2880, 2, 64, 8, 64, 201088, 128, 4, 128, 4096, 200002},
};

}  // namespace

std::vector<std::string> GptOssSyntheticShapes(const std::string& arch) {
  std::vector<std::string> names;
  if (arch != "gpt_oss") return names;
  for (const GptOssShape& s : kGptOssShapes) names.push_back(s.name);
  return names;
}

absl::StatusOr<checkpoint::GptOssConfig> GptOssSyntheticConfig(const std::string& shape, const std::string& torch_dtype) {
  for (const GptOssShape& s : kGptOssShapes) {
    if (shape != s.name) continue;
    checkpoint::GptOssConfig c;
    checkpoint::ModelConfig& b = c.base;
    b.model_type = "gpt_oss";
    b.hidden_size = s.hidden;
    b.intermediate_size = s.intermediate;
    b.num_hidden_layers = s.layers;
    b.num_attention_heads = s.heads;
    b.num_key_value_heads = s.kv_heads;
    b.head_dim = s.head_dim;
    b.vocab_size = s.vocab;
    b.max_position_embeddings = 32 * s.original_positions;
    b.rms_norm_eps = 1e-5;
    b.rope_theta = 150000.0;
    b.attention_bias = b.o_proj_bias = true;
    b.eos_token_id = s.eos;
    b.torch_dtype = torch_dtype;
    b.sliding_window = s.window;
    for (int64_t i = 0; i < s.layers; ++i) b.sliding_window_layers.push_back(i % 2 == 0);
    c.num_local_experts = s.experts;
    c.num_experts_per_tok = s.top_k;
    checkpoint::YarnScaling yarn;
    yarn.factor = 32.0;
    yarn.original_max_position_embeddings = s.original_positions;
    yarn.truncate = false;
    c.yarn = yarn;
    return c;
  }
  return absl::InvalidArgumentError(StrCat("shape \"", shape, "\" is not known for arch gpt_oss (known: ",
                                           StrJoin(GptOssSyntheticShapes("gpt_oss"), ", "), ")"));
}

}  // namespace quark::runtime
