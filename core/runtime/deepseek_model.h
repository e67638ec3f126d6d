// A whole DeepSeek-V3 forward (embedding, decoder layers, final norm, lm_head) on one set of weights, loading one layer
// at a time: the family's own forward, for the reference checks and the GGUF tool. The pipeline runs DeepSeek through
// TransformerModel and the LayerStreamer (family kDeepseek), which tests/quantize/deepseek_pipeline_test holds to this.
#pragma once

#include <functional>
#include <memory>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// The context every DeepSeek layer of a forward shares: causal mask and DeepseekRopeTables for `seq_len`.
LayerContext DeepseekLayerContext(const checkpoint::DeepseekConfig& config, int64_t seq_len, at::ScalarType dtype);

/// Logits [B, T, vocab] (float32; float64 when `dtype` is) of token ids [B, T] (int64) in compute dtype `dtype`; layers are loaded, run and
/// released one by one (the MTP layers are never loaded). Errors: ids outside the vocabulary, missing or mis-shaped
/// tensors (named).
/// `prepare` (optional) runs on each layer after it is loaded and before it runs (a quantizer replacing its linears);
/// its error ends the forward.
using DeepseekLayerHook = std::function<absl::Status(DecoderLayer& layer)>;
absl::StatusOr<at::Tensor> DeepseekLogits(const checkpoint::DeepseekConfig& config, const WeightSource& weights,
                                          const at::Tensor& ids, at::ScalarType dtype,
                                          const DeepseekLayerHook& prepare = nullptr);

}  // namespace quark::runtime
