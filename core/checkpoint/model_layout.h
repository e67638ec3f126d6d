// The HF tensor and module names of each supported architecture, in one place: the runtime builds modules
// under these names, the synthetic-model maker writes these tensors, and ListModelModules reports them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/model_config.h"

namespace quark::checkpoint {

/// A linear layer inside a decoder layer.
struct LinearSpec {
  std::string relative_name;  // "self_attn.q_proj", "mlp.down_proj", "fc1", ...
  int64_t out_features = 0;
  int64_t in_features = 0;
  bool has_bias = false;
  /// What the linear reads, named after the module that produces it ("input_layernorm", "self_attn", ...). Linears
  /// with the same input read the same tensor in a forward; a linear's input depends on every linear whose input
  /// comes earlier in forward order (the Hessian-based algorithms share and order their statistics by it).
  std::string input;
  /// An MoE expert's linear: it reads only the tokens the router sends to its expert, so a forward may not reach it.
  bool routed = false;
};

/// What a tensor is, for initialisation of synthetic weights.
/// kRouterWeight: an MoE router (moe_layout.h), a matrix that is never a quantizable module.
enum class TensorRole { kEmbedding, kLinearWeight, kLinearBias, kNormWeight, kNormBias, kRouterWeight };

struct TensorSpec {
  std::string name;  // full HF tensor name, "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;
  TensorRole role = TensorRole::kLinearWeight;
};

/// "model.layers.{i}." (Llama family) or "model.decoder.layers.{i}." (OPT).
std::string LayerPrefix(const ModelConfig& config, int64_t layer);
/// The decoder layers' module name, as Quark's algo_config calls it: "model.layers" / "model.decoder.layers".
std::string DecoderLayersName(const ModelConfig& config);

/// The linears of one decoder layer, in forward order. For a family whose layers differ (DeepSeek: dense layers
/// before the MoE ones) the union over its layer kinds, each name once; LayerLinears(config, layer) is exact.
std::vector<LinearSpec> LayerLinears(const ModelConfig& config);
/// The linears of decoder layer `layer`, in forward order.
std::vector<LinearSpec> LayerLinears(const ModelConfig& config, int64_t layer);

/// The router tensors of decoder layer `layer` (full names; never quantized, copied in float by the exports): the
/// MoE families' gates, DeepSeek's gate and e_score_correction_bias, gpt-oss's router, its bias and the attention
/// sinks. Empty for a dense layer.
std::vector<TensorSpec> LayerRouterTensors(const ModelConfig& config, int64_t layer);

/// Whether the family routes tokens to experts (MoE, DeepSeek): its layers have routers and routed linears.
bool HasRoutedExperts(const ModelConfig& config);

/// "model.embed_tokens" / "model.decoder.embed_tokens".
std::string EmbedTokensName(const ModelConfig& config);
/// "model.norm" / "model.decoder.final_layer_norm".
std::string FinalNormName(const ModelConfig& config);
/// OPT's learned positions, "model.decoder.embed_positions" (rows = max_position_embeddings + 2).
inline constexpr int64_t kOptPositionOffset = 2;

/// The norm tensors of one decoder layer (relative names with ".weight"/".bias").
std::vector<TensorSpec> LayerNormTensors(const ModelConfig& config, int64_t layer);

/// Every tensor of a full checkpoint of this architecture, in HF's order (lm_head.weight only when not tied;
/// OPT's project_in/project_out when word_embed_proj_dim differs from hidden_size; DeepSeek's MTP layers, which no
/// forward runs: IsOutsideForward). gpt-oss: its experts per expert (GptOssSplitModelTensors), as the pipeline and
/// the exports see them; the checkpoint may hold them fused.
std::vector<TensorSpec> ModelTensors(const ModelConfig& config);

/// Whether `tensor` is stored in the checkpoint but outside the forward (DeepSeek's MTP layers): never quantized,
/// copied as stored by the exports that carry it.
bool IsOutsideForward(const ModelConfig& config, const std::string& tensor);

}  // namespace quark::checkpoint
