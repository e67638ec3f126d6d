// GPTAQ and Qronos over one decoder layer, in Quark's order (BaseHessianProcessor.apply with
// _use_original_weight): for each inside_layer_modules entry, the paired statistics of its modules' inputs are
// collected sample by sample, the quantized-model sample through the layer as it is now (earlier entries already
// quantized) and the float-model sample through the layer with its original weights; then each module of the entry
// is quantized (asymmetric_gptq.h). An input's statistics are kept, not collected again, while no module upstream of it
// has been quantized since they were collected (QuantizedUpstreamOf, as GPTQ's Hessians; true_sequential's k_proj,
// v_proj, q_proj): a module never changes its own input, so Quark's new collection gives the same numbers. GPTAQ derives its factor and P from an input's
// statistics once, on the input's first reader, and shares them with the others (GptaqFactorOf: no copies of the
// statistics, the same bits). Afterwards the float samples move on through the
// layer with its original weights: the float stream the next layer pairs with.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/asymmetric_gptq.h"
#include "core/algorithms/gptq_layer.h"
#include "core/numerics/quant_params.h"
#include "core/runtime/decoder_layer.h"

namespace quark::algorithms {

/// Runs the layer on one sample [1, T, hidden] and returns its output (the caller supplies the model's context).
using LayerForwardOutput = std::function<at::Tensor(const at::Tensor& sample)>;

/// `quantized_samples`: the layer's inputs in the quantized model; `float_samples`: the same samples' inputs in the
/// float model, replaced on success by the layer's float outputs. The plan's FloatLinears hold the quantized
/// weights afterwards. Returns the weight parameters by full module name. MoE expert (routed) targets are
/// UNIMPLEMENTED; errors name the module.
absl::StatusOr<std::map<std::string, QuantParams>> AsymmetricQuantizeLayer(
    runtime::DecoderLayer& layer, const std::vector<at::Tensor>& quantized_samples,
    std::vector<at::Tensor>& float_samples, const LayerForwardOutput& forward, const GptqLayerPlan& plan,
    const AsymmetricOptions& options, const GptqLayerCallbacks& callbacks = {});

}  // namespace quark::algorithms
