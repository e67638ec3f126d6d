#include "core/checkpoint/config_limits.h"

#include <algorithm>
#include <map>

#include "core/base/strings.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/llama4_config.h"

namespace quark::checkpoint {

int64_t SizeLimitOf(const std::string& field) {
  static const std::map<std::string, int64_t>* const kLimits = new std::map<std::string, int64_t>{
      {"num_hidden_layers", kMaxLayers},
      {"num_local_experts", kMaxExperts},
      {"num_experts", kMaxExperts},
      {"num_experts_per_tok", kMaxExperts},
      {"hidden_size", kMaxHiddenSize},
      {"word_embed_proj_dim", kMaxHiddenSize},
      {"intermediate_size", kMaxIntermediateSize},
      {"ffn_dim", kMaxIntermediateSize},
      {"moe_intermediate_size", kMaxIntermediateSize},
      {"shared_expert_intermediate_size", kMaxIntermediateSize},
      {"num_attention_heads", kMaxHeads},
      {"num_key_value_heads", kMaxHeads},
      {"head_dim", kMaxHeadDim},
      {"vocab_size", kMaxVocabSize},
      {"max_position_embeddings", kMaxPositions},
  };
  auto it = kLimits->find(field);
  return it == kLimits->end() ? 0 : it->second;
}

absl::Status CheckSizeLimit(const std::string& label, const std::string& field, int64_t value) {
  const int64_t limit = SizeLimitOf(field);
  if (limit <= 0 || value <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      quark::StrCat(label, ": field \"", field, "\" = ", value, " is above the limit ", limit));
}

absl::Status CheckTensorCountBound(const ModelConfig& config, int64_t tensors_held, const std::string& location) {
  if (config.num_hidden_layers > tensors_held) {
    return absl::InvalidArgumentError(quark::StrCat(
        "config.json: field \"num_hidden_layers\" = ", config.num_hidden_layers, " is more layers than the ",
        tensors_held, " tensors of ", location, " can hold"));
  }
  // gpt-oss stores a layer's experts in four fused tensors (its parser bounds layers x experts by kMaxLayerExperts).
  const bool fused_experts = config.family == ArchFamily::kGptOss;
  // Only the MoE layers hold experts: DeepSeek-V3's first_k_dense_replace layers and Llama 4's interleaved dense
  // layers hold none (a DeepSeek-V3 cut of 3 dense + 1 MoE layer holds 256 experts, not 4 x 256).
  int64_t moe_layers = config.num_hidden_layers;
  if (config.deepseek) {
    moe_layers = std::max<int64_t>(config.num_hidden_layers - config.deepseek->first_k_dense_replace, 0);
  }
  if (config.llama4) {
    moe_layers = 0;
    for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) moe_layers += config.llama4->IsMoeLayer(layer);
  }
  if (config.num_experts > 0 && !fused_experts && moe_layers * config.num_experts > tensors_held) {
    const char* field = config.model_type == "mixtral" ? "num_local_experts" : "num_experts";
    return absl::InvalidArgumentError(quark::StrCat(
        "config.json: field \"", field, "\" = ", config.num_experts, " in each of ", moe_layers,
        " MoE layers is more experts than the ", tensors_held, " tensors of ", location, " can hold"));
  }
  return absl::OkStatus();
}

}  // namespace quark::checkpoint
