#include "tests/algorithms/awq_layer_error.h"

#include <gtest/gtest.h>

#include "core/algorithms/smoothing.h"
#include "core/numerics/fake_quant.h"

namespace quark::testing {

double AwqLayerZeroHeldOutError(runtime::TransformerModel& model, const std::vector<ScalingLayer>& pairs,
                                const QuantSpec& spec, const std::vector<at::Tensor>& calibration,
                                const std::vector<at::Tensor>& held_out, const algorithms::HeadLayout& heads,
                                int64_t min_expert_tokens) {
  // Layer 0: its inputs are the embeddings, what the calibration and held-out samples are.
  auto layer = model.LoadLayer(0).value();
  auto reference = model.LoadLayer(0).value();
  algorithms::LayerQuantSpecs specs;
  for (const auto& linear : layer->NamedLinears()) specs[linear.relative_name].weight = spec;
  algorithms::ScalingInputs in;
  in.samples = &calibration;
  in.run = [&](const at::Tensor& x) { return layer->forward(x, model.Context(x.size(1))); };
  in.context = [&](int64_t t) -> const runtime::LayerContext& { return model.Context(t); };
  in.heads = heads;
  in.min_expert_tokens = min_expert_tokens;
  std::vector<at::Tensor> outputs;
  auto applied = algorithms::AwqLayer(*layer, in, pairs, specs, algorithms::AwqOptions{}, &outputs);
  EXPECT_TRUE(applied.ok()) << applied.status();
  for (const auto& linear : layer->NamedLinears()) {
    const at::Tensor w = linear.linear->weight();
    const QuantParams params = ParamsOf(w, spec, TensorRole::kWeight).value();
    EXPECT_TRUE(algorithms::SetLinearWeight(*layer, linear.relative_name,
                                            FakeQuantize(w, spec, params, TensorRole::kWeight).value()).ok());
  }
  double sum = 0;
  for (const at::Tensor& x : held_out) {
    const runtime::LayerContext& context = model.Context(x.size(1));
    sum += (layer->forward(x, context) - reference->forward(x, context)).pow(2).sum().item<double>();
  }
  return sum;
}

}  // namespace quark::testing
