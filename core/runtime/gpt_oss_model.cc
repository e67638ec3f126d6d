#include "core/runtime/gpt_oss_model.h"

#include "core/runtime/attention.h"
#include "core/runtime/gpt_oss_layer.h"
#include "core/runtime/layerwise_logits.h"
#include "core/runtime/yarn_rope.h"

namespace quark::runtime {

LayerContext GptOssLayerContext(const checkpoint::GptOssConfig& config, int64_t seq_len, at::ScalarType dtype) {
  const checkpoint::ModelConfig& base = config.base;
  LayerContext context;
  context.seq_len = seq_len;
  context.mask = CausalMask(seq_len);
  context.sliding_window = base.sliding_window;
  if (base.sliding_window > 0) context.sliding_mask = CausalMask(seq_len, base.sliding_window);
  YarnRopeTables(YarnRopeFrequencies(config.yarn, base.head_dim, base.rope_theta), seq_len, dtype, &context.cos,
                 &context.sin);
  return context;
}

absl::StatusOr<at::Tensor> GptOssLogits(const checkpoint::GptOssConfig& config, const WeightSource& weights,
                                        const at::Tensor& ids, at::ScalarType dtype, const GptOssLayerHook& prepare) {
  const LayerContext context = GptOssLayerContext(config, ids.dim() == 2 ? ids.size(1) : 0, dtype);
  const LayerLoader load = [&](int64_t i) { return AsDecoderLayer(GptOssDecoderLayer::Load(config, i, weights, dtype)); };
  return LayerwiseLogits(config.base, weights, ids, dtype, context, load, prepare);
}

}  // namespace quark::runtime
