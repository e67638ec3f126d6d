#include "core/runtime/deepseek_model.h"

#include "core/runtime/deepseek_attention.h"
#include "core/runtime/deepseek_layer.h"
#include "core/runtime/layerwise_logits.h"

namespace quark::runtime {

LayerContext DeepseekLayerContext(const checkpoint::DeepseekConfig& config, int64_t seq_len, at::ScalarType dtype) {
  LayerContext context;
  context.seq_len = seq_len;
  context.mask = CausalMask(seq_len);
  DeepseekRopeTables(config, seq_len, dtype, &context.cos, &context.sin);
  return context;
}

absl::StatusOr<at::Tensor> DeepseekLogits(const checkpoint::DeepseekConfig& config, const WeightSource& weights,
                                          const at::Tensor& ids, at::ScalarType dtype, const DeepseekLayerHook& prepare) {
  const LayerContext context = DeepseekLayerContext(config, ids.dim() == 2 ? ids.size(1) : 0, dtype);
  const LayerLoader load = [&](int64_t i) { return AsDecoderLayer(DeepseekDecoderLayer::Load(config, i, weights, dtype)); };
  return LayerwiseLogits(config.base, weights, ids, dtype, context, load, prepare);
}

}  // namespace quark::runtime
