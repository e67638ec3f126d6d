// The decoder-only Llama-family model (llama, mistral, qwen2 as core/runtime computes them) as ONNX nodes:
//   input_ids, attention_mask, position_ids [batch, seq] int64 (+ past_key_values.N.key/value) -> logits
//   (+ present.N.key/value), the names ONNX Runtime GenAI and Optimum use.
// Each piece computes what the engine computes, in its order where ONNX can say it (onnx_torch_order.h): RMSNorm in
// float32 (w * (x * 1/sqrt(sum(x^2) / n + eps)), the sum in LibTorch's order), SiLU as x / (1 + exp(-x)), rotate-half
// RoPE from the engine's own cos/sin tables (RopeTables, so rope_theta and rope_scaling match to the bit) gathered by
// position_ids, grouped-query attention with query head h on KV head h / (heads / kv_heads), scores scaled by
// 1/sqrt(head_dim), a causal (and sliding-window) mask joined with attention_mask, SiLU-gated MLP, tied or untied
// lm_head. Built front to back (Begin at creation, one Layer per finished decoder layer, End at Finish) so the node
// list is in topological order while the weights stream.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/export/onnx_graph.h"
#include "core/runtime/weight_source.h"

namespace quark::exporter::onnx_export {

/// Computes linear `module` (full HF name) of input value `x` and returns its output value's name.
using LinearBuilder = std::function<absl::StatusOr<std::string>(const std::string& module, const std::string& x,
                                                                int64_t in_features)>;

class LlamaGraph {
 public:
  LlamaGraph(OnnxGraph& graph, checkpoint::ModelConfig model, bool kv_cache)
      : g_(graph), model_(std::move(model)), kv_cache_(kv_cache) {}

  /// Graph inputs, the embedding lookup, the masks and the RoPE tables (written here).
  absl::Status Begin();
  /// Decoder layer `index`: norms from `weights`, every linear through `linear`.
  absl::Status Layer(int64_t index, const runtime::WeightSource& weights, const LinearBuilder& linear);
  /// Final norm, lm_head and the embedding table, from `weights`; the logits output.
  absl::Status End(const runtime::WeightSource& weights);

 private:
  absl::StatusOr<std::string> RmsNorm(const std::string& x, const std::string& weight_name,
                                      const runtime::WeightSource& weights);
  std::string Rope(const std::string& x, const std::string& name);
  std::string Attention(int64_t index, const std::string& q, const std::string& k, const std::string& v);

  OnnxGraph& g_;
  checkpoint::ModelConfig model_;
  bool kv_cache_;
  std::string hidden_;          // the running hidden state [B, T, H]
  std::string cos_, sin_;       // [B, 1, T, D]
  std::string mask_, window_mask_;  // bool [B, 1, 1, T, S]: key visible to query
};

}  // namespace quark::exporter::onnx_export
