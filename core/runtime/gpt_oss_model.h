// A whole gpt-oss forward (embedding, decoder layers, final norm, lm_head) loading one layer at a time: the family's
// own forward, for the reference check against HF's modeling code. The pipeline runs it through TransformerModel
// and the LayerStreamer.
#pragma once

#include <functional>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// The context every gpt-oss layer of a forward shares: the causal mask, the sliding-window mask (HF's
/// kv_idx > q_idx - sliding_window) and the YaRN cos/sin tables [T, head_dim], for `seq_len` tokens.
LayerContext GptOssLayerContext(const checkpoint::GptOssConfig& config, int64_t seq_len, at::ScalarType dtype);

/// Logits [B, T, vocab] (float32; float64 when `dtype` is) of token ids [B, T] (int64) in compute dtype `dtype`.
/// `prepare` (optional) runs on each layer after it is loaded and before it runs; its error ends the forward.
/// Errors: ids outside the vocabulary, missing or mis-shaped tensors (named).
using GptOssLayerHook = std::function<absl::Status(DecoderLayer& layer)>;  // = LayerHook (layerwise_logits.h)
absl::StatusOr<at::Tensor> GptOssLogits(const checkpoint::GptOssConfig& config, const WeightSource& weights,
                                        const at::Tensor& ids, at::ScalarType dtype, const GptOssLayerHook& prepare = nullptr);

}  // namespace quark::runtime
