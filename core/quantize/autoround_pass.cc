#include "core/quantize/autoround_pass.h"

#include <cstdio>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/autoround_json.h"
#include "core/config/quant_types.h"
#include "core/export/scale_dtype.h"
#include "core/runtime/layer_forward.h"

namespace quark::quantize {

absl::StatusOr<std::unique_ptr<AutoRoundPass>> AutoRoundPass::Create(const AutoRoundAlgo& algo, const LayerPlan& plan,
                                                                     const checkpoint::ModelConfig& model,
                                                                     std::string path) {
  QUARK_RETURN_IF_ERROR(CheckAutoRoundRanges(algo, path));
  const std::string layers = checkpoint::DecoderLayersName(model);
  if (!algo.model_decoder_layers.empty() && algo.model_decoder_layers != layers) {
    return absl::InvalidArgumentError(StrCat(path, ".model_decoder_layers: \"", algo.model_decoder_layers,
                                             "\" is not this model's decoder layers (\"", layers, "\")"));
  }
  std::unique_ptr<AutoRoundPass> pass(new AutoRoundPass());
  pass->options_ = algorithms::ResolveAutoRoundOptions(algo);
  pass->plan_ = plan;
  pass->path_ = std::move(path);
  return pass;
}

absl::StatusOr<std::vector<algorithms::AutoRoundTarget>> AutoRoundPass::TargetsOf(
    const runtime::DecoderLayer& layer) const {
  std::vector<algorithms::AutoRoundTarget> targets;
  for (const runtime::NamedLinear& linear : layer.NamedLinears()) {
    const LayerAssignment* a = plan_.Find(linear.name);
    if (a == nullptr || a->source == ConfigSource::kExcluded || !a->config.weight) continue;
    if (IsCastType(a->config.weight->dtype)) continue;
    const std::string why = AutoRoundWeightProblem(a->config.weight);
    if (!why.empty()) return absl::InvalidArgumentError(StrCat(path_, ": ", linear.name, ": autoround needs ", why));
    targets.push_back({linear.relative_name,
                       exporter::WeightSpecForExport(*a->config.weight, linear.linear->weight().scalar_type())});
  }
  return targets;
}

absl::StatusOr<AutoRoundLayerOutput> AutoRoundPass::Run(runtime::DecoderLayer& layer,
                                                        const std::vector<at::Tensor>& samples,
                                                        runtime::TransformerModel& model,
                                                        const algorithms::AutoRoundCallbacks& callbacks) const {
  QUARK_ASSIGN_OR_RETURN(const auto targets, TargetsOf(layer));
  const algorithms::BlockForward forward = [&](const at::Tensor& sample) {
    return runtime::ForwardSample(layer, sample, model);
  };
  auto result = algorithms::AutoRoundQuantizeLayer(layer, samples, forward, targets, options_, callbacks,
                                                   model.activations());
  if (!result.ok()) {
    return absl::Status(result.status().code(), StrCat(path_, " (autoround): ", std::string(result.status().message())));
  }
  AutoRoundLayerOutput out;
  for (auto& [name, p] : result->params) out.params[name].weight = std::move(p);
  char line[256];
  std::snprintf(line, sizeof(line), "autoround %s: %zu linears, loss %.6g (iter 0) -> %.6g (iter %d), %.2f%% of "
                "roundings changed", layer.prefix().c_str(), targets.size(), result->first_loss, result->best_loss,
                result->best_iter,
                result->weights == 0 ? 0.0 : 100.0 * static_cast<double>(result->changed_roundings) / result->weights);
  out.summary = line;
  return out;
}

}  // namespace quark::quantize
