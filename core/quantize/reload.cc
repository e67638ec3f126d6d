#include "core/quantize/reload.h"

#include "core/quantize/quant_linear.h"

namespace quark::quantize {
namespace {

absl::Status InstallExported(const exporter::HfQuarkWeightSource& source, runtime::DecoderLayer& layer) {
  for (const runtime::NamedLinear& linear : layer.NamedLinears()) {
    const LayerAssignment* a = source.Assignment(linear.name);
    if (a == nullptr || a->source == ConfigSource::kExcluded || a->config.Empty()) continue;
    auto activations = source.Activations(linear.name);
    if (!activations.ok()) return activations.status();
    QuantLinearOptions options;
    options.name = linear.name;
    options.config = a->config;
    options.weight = linear.linear->weight();  // already dequantized by the source
    options.bias = linear.linear->bias();
    options.weight_prequantized = true;
    options.input_params = activations->input;
    options.output_params = activations->output;
    auto q = QuantLinear::Create(std::move(options));
    if (!q.ok()) return q.status();
    if (auto s = (*q)->Freeze(); !s.ok()) return s;
    if (auto s = layer.ReplaceLinear(linear.relative_name, *q); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReloadedModel> OpenQuantizedExport(const std::string& dir, runtime::StreamerOptions options) {
  auto source = exporter::HfQuarkWeightSource::Open(dir, options.compute_dtype);
  if (!source.ok()) return source.status();
  std::shared_ptr<const exporter::HfQuarkWeightSource> shared = *std::move(source);
  auto streamer = runtime::LayerStreamer::Create(shared->model_config(), shared, options);
  if (!streamer.ok()) return streamer.status();
  ReloadedModel model;
  model.streamer = *std::move(streamer);
  model.source = shared;
  model.hooks.before = [shared](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&) {
    return InstallExported(*shared, layer);
  };
  return model;
}

}  // namespace quark::quantize
