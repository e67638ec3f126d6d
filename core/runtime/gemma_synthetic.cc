#include "core/runtime/gemma_synthetic.h"

#include <cstdint>

#include "core/base/strings.h"

namespace quark::runtime {
namespace {

using checkpoint::ModelConfig;

struct GemmaShape {
  const char* arch;
  const char* name;
  int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, max_positions, window;
  double rope_theta, rope_local_base_freq, query_pre_attn_scalar, attn_softcap, final_softcap;
};

// Real shapes from the published config.json files (google/gemma-2-9b, google/gemma-3-1b-pt). The tiny ones keep
// query_pre_attn_scalar = head_dim (llama.cpp scales by head_dim**-0.5 whatever the config says), a window shorter
// than test sequences, and enough layers for both kinds: Gemma 2 alternates, Gemma 3's layer 5 is its first global.
constexpr GemmaShape kGemmaShapes[] = {
    {"gemma2", "tiny", 64, 172, 4, 4, 2, 16, 512, 512, 8, 10000.0, 0, 16, 50.0, 30.0},
    {"gemma2", "gemma-2-9b", 3584, 14336, 42, 16, 8, 256, 256000, 8192, 4096, 10000.0, 0, 256, 50.0, 30.0},
    {"gemma3_text", "tiny", 64, 172, 6, 4, 2, 16, 512, 512, 8, 1000000.0, 10000.0, 16, 0, 0},
    {"gemma3_text", "gemma-3-1b", 1152, 6912, 26, 4, 1, 256, 262144, 32768, 512, 1000000.0, 10000.0, 256, 0, 0},
};

}  // namespace

std::vector<std::string> GemmaSyntheticShapes(const std::string& arch) {
  std::vector<std::string> names;
  for (const GemmaShape& s : kGemmaShapes) {
    if (arch == s.arch) names.push_back(s.name);
  }
  return names;
}

absl::StatusOr<ModelConfig> GemmaSyntheticConfig(const std::string& arch, const std::string& shape,
                                                 const std::string& torch_dtype) {
  for (const GemmaShape& s : kGemmaShapes) {
    if (arch != s.arch || shape != s.name) continue;
    ModelConfig c;
    c.model_type = arch;
    c.family = checkpoint::ArchFamily::kGemma;
    c.hidden_size = s.hidden;
    c.intermediate_size = s.intermediate;
    c.num_hidden_layers = s.layers;
    c.num_attention_heads = s.heads;
    c.num_key_value_heads = s.kv_heads;
    c.head_dim = s.head_dim;
    c.vocab_size = s.vocab;
    c.max_position_embeddings = s.max_positions;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = s.rope_theta;
    c.rope_local_base_freq = s.rope_local_base_freq;
    c.query_pre_attn_scalar = s.query_pre_attn_scalar;
    c.attn_logit_softcapping = s.attn_softcap;
    c.final_logit_softcapping = s.final_softcap;
    c.hidden_act = "gelu_pytorch_tanh";
    c.tie_word_embeddings = true;
    c.bos_token_id = 2;  // Gemma's <bos> and <eos>
    c.eos_token_id = 1;
    c.torch_dtype = torch_dtype;
    c.sliding_window = s.window;
    // Gemma 2: even layers slide; Gemma 3: every 6th layer is global (the HF configs' defaults).
    const int64_t pattern = arch == "gemma2" ? 2 : 6;
    for (int64_t i = 0; i < s.layers; ++i) c.sliding_window_layers.push_back((i + 1) % pattern != 0);
    return c;
  }
  return absl::InvalidArgumentError(StrCat("shape \"", shape, "\" is not known for arch ", arch, " (known: ",
                                           StrJoin(GemmaSyntheticShapes(arch), ", "), ")"));
}

}  // namespace quark::runtime
