// One decoder layer's forward over a pass's samples (the calibration forward, the forward that feeds the next layer,
// the evaluation windows).
#pragma once

#include <vector>

#include <ATen/ATen.h>

#include "core/runtime/decoder_layer.h"
#include "core/runtime/transformer_model.h"

namespace quark::runtime {

/// `layer` on each of `hidden` ([1, T, hidden] each) -> the outputs, in order. When the model's routed experts stream
/// in groups (ExpertStreamingWeights) and `layer` has a routed block (MoeSplitLayer), every sample's attention runs
/// first and the block then walks its experts once for all samples (MoeBlock::ForwardSamples), so that each expert is
/// loaded at most once per call instead of once per sample; the outputs, and what every linear sees, are bit for bit
/// those of the sample-by-sample forward, which every other layer (and the whole-layer path) runs.
/// Each output is where the model keeps activations (model.activations().Hold: on the host when they do not fit the
/// device); with activations kept on the host the streamed-expert path keeps every sample's residual, block input and
/// routed sum there too, and the device holds one sample's attention, then one sample's tokens of one expert at a time
/// (each expert still loaded once per call).
std::vector<at::Tensor> ForwardLayerSamples(DecoderLayer& layer, const std::vector<at::Tensor>& hidden,
                                            TransformerModel& model);

/// `layer` on one sample [1, T, hidden], wherever it is kept: placed on the layer's device first. The output stays on
/// the device (Hold it to keep it).
at::Tensor ForwardSample(DecoderLayer& layer, const at::Tensor& sample, TransformerModel& model);

/// ForwardSample's output where the model keeps activations (Hold): what a pass keeps of a forward.
at::Tensor ForwardAndHold(DecoderLayer& layer, const at::Tensor& sample, TransformerModel& model);

}  // namespace quark::runtime
