// The RTN plan of the family tests, and one decoder layer quantized by RTN and by GPTQ on the same calibration samples, each output's distance to the float
// layer's: the check the family tests (DeepSeek-V3, gpt-oss) run layer by layer on their own forwards.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/algorithms/gptq_layer.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/decoder_layer.h"

namespace quark::quantize::testing {

/// uint4 g32 weight-only RTN with the plan the pipeline builds from the model's modules, lm_head excluded.
inline LayerQuantizer Uint4Wo32Rtn(const std::vector<ModuleInfo>& modules) {
  Config preset = *PresetConfig("uint4_wo_32");
  preset.exclude = {"lm_head"};
  return LayerQuantizer(preset, BuildLayerPlan(preset, modules));
}

struct LayerErrors {
  double gptq = 0;  // |GPTQ layer's outputs - float layer's| (Frobenius, over the samples)
  double rtn = 0;   // likewise for RTN with the same weight spec
};

/// `load` gives a fresh float layer; `linears` its linears in forward order (one GPTQ step per input, routed experts
/// covered by a top-up of `min_expert_tokens`); `rtn` the RTN quantizer whose global weight spec GPTQ uses too.
inline LayerErrors GptqVsRtn(const std::function<std::shared_ptr<runtime::DecoderLayer>()>& load,
                             const std::vector<at::Tensor>& samples, const runtime::LayerContext& context,
                             const std::vector<checkpoint::LinearSpec>& linears, const LayerQuantizer& rtn,
                             int64_t min_expert_tokens) {
  const auto outputs = [&](runtime::DecoderLayer& layer) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& x : samples) out.push_back(layer.forward(x, context));
    return at::cat(out);
  };
  const at::Tensor reference = outputs(*load());
  LayerErrors errors;
  auto rtn_layer = load();
  EXPECT_TRUE(rtn.Apply(*rtn_layer, CalibratedParams{}).ok());
  errors.rtn = (outputs(*rtn_layer) - reference).norm().item<double>();
  auto gptq_layer = load();
  algorithms::GptqLayerPlan plan;
  plan.min_expert_tokens = min_expert_tokens;
  for (const checkpoint::LinearSpec& linear : linears) {
    if (plan.input_order.empty() || plan.input_order.back() != linear.input) {
      plan.input_order.push_back(linear.input);
      plan.steps.emplace_back();
    }
    plan.steps.back().push_back({linear.relative_name, linear.input, *rtn.config().global_quant_config.weight, linear.routed});
  }
  const algorithms::LayerForward forward = [&](const at::Tensor& x) { gptq_layer->forward(x, context); };
  auto params = algorithms::GptqQuantizeLayer(*gptq_layer, samples, forward, plan, algorithms::GptqOptions{});
  EXPECT_TRUE(params.ok()) << params.status();
  if (params.ok()) EXPECT_EQ(params->size(), gptq_layer->NamedLinears().size());
  errors.gptq = (outputs(*gptq_layer) - reference).norm().item<double>();
  return errors;
}

}  // namespace quark::quantize::testing
