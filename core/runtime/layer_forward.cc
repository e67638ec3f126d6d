#include "core/runtime/layer_forward.h"

#include "core/runtime/expert_streaming.h"
#include "core/runtime/moe_split_layer.h"

namespace quark::runtime {

std::vector<at::Tensor> ForwardLayerSamples(DecoderLayer& layer, const std::vector<at::Tensor>& hidden,
                                            TransformerModel& model) {
  std::vector<at::Tensor> outputs;
  outputs.reserve(hidden.size());
  auto* split = dynamic_cast<MoeSplitLayer*>(&layer);
  MoeBlock* block = split != nullptr ? split->routed_block() : nullptr;
  // Sample by sample unless streamed experts would reload: the whole-layer path stays the reference the streamed one
  // is compared with, and only the streamed path needs every sample's block input at once.
  if (block == nullptr || hidden.size() < 2 || ExpertStreamingOf(model.weights()) == nullptr) {
    for (const at::Tensor& input : hidden) outputs.push_back(ForwardAndHold(layer, input, model));
    return outputs;
  }
  // Each sample's attention on the device, its residual and block input kept where the activations are; the block then
  // keeps them there too (with the activations on the host, the device holds one sample at a time).
  const ActivationHome& activations = model.activations();
  std::vector<at::Tensor> attended, block_inputs;
  attended.reserve(hidden.size());
  block_inputs.reserve(hidden.size());
  for (const at::Tensor& input : hidden) {
    const at::Tensor h = split->Attend(activations.Place(input), model.Context(input.size(1)));
    block_inputs.push_back(activations.Hold(split->FeedForwardInput(h)));
    attended.push_back(activations.Hold(h));
  }
  std::vector<at::Tensor> routed = block->ForwardSamples(block_inputs, activations);
  for (size_t i = 0; i < hidden.size(); ++i) outputs.push_back(attended[i] + routed[i]);
  return outputs;
}

at::Tensor ForwardSample(DecoderLayer& layer, const at::Tensor& sample, TransformerModel& model) {
  return layer.forward(model.activations().Place(sample), model.Context(sample.size(1)));
}

at::Tensor ForwardAndHold(DecoderLayer& layer, const at::Tensor& sample, TransformerModel& model) {
  return model.activations().Hold(ForwardSample(layer, sample, model));
}

}  // namespace quark::runtime
