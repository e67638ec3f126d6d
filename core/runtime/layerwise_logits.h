// A whole forward of a family whose layers load from a WeightSource one at a time (DeepSeek-V3, gpt-oss): embedding,
// each layer loaded, prepared and run, then the final RMSNorm and lm_head. The families' own forwards, for their
// reference checks; the pipeline runs through TransformerModel and the LayerStreamer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// Loads decoder layer `index` (a family's Load).
using LayerLoader = std::function<absl::StatusOr<std::shared_ptr<DecoderLayer>>(int64_t index)>;
/// A family's loaded layer as a DecoderLayer.
template <typename Layer>
absl::StatusOr<std::shared_ptr<DecoderLayer>> AsDecoderLayer(absl::StatusOr<std::shared_ptr<Layer>> layer) {
  if (!layer.ok()) return layer.status();
  return std::shared_ptr<DecoderLayer>(*std::move(layer));
}

/// Runs on each layer after it is loaded and before it runs (a quantizer replacing its linears); its error ends the
/// forward.
using LayerHook = std::function<absl::Status(DecoderLayer& layer)>;

/// Logits [B, T, vocab] (float32; float64 when `dtype` is) of token ids [B, T] (int64): model.embed_tokens, the
/// `base.num_hidden_layers` layers `load` gives run with `context`, model.norm (RMSNorm, base.rms_norm_eps), lm_head or
/// the tied embedding. Errors: ids outside the vocabulary, missing or mis-shaped tensors (named).
absl::StatusOr<at::Tensor> LayerwiseLogits(const checkpoint::ModelConfig& base, const WeightSource& weights,
                                           const at::Tensor& ids, at::ScalarType dtype, const LayerContext& context,
                                           const LayerLoader& load, const LayerHook& prepare);

}  // namespace quark::runtime
