// Loads an HF-quark export back into the runtime so it can be evaluated like the model it came from: packed
// weights dequantized on load (HfQuarkWeightSource), and LayerHooks that give every quantized linear its exported
// activation quantization (static input / KV-cache scales, dynamic and cast specs as configured).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/export/hf_quark_source.h"
#include "core/runtime/layer_streamer.h"

namespace quark::quantize {

struct ReloadedModel {
  std::unique_ptr<runtime::LayerStreamer> streamer;
  /// Pass to every Run / EvaluatePerplexity on `streamer` (installs the activation quantizers).
  runtime::LayerHooks hooks;
  std::shared_ptr<const exporter::HfQuarkWeightSource> source;
};

/// Opens `dir` (an export written by QuantizeModel or Quark): HF-quark, or compressed-tensors (#30 item 2: its
/// quantization_config's quant_method says which; CtWeightSource). Errors of the source's Open pass through.
absl::StatusOr<ReloadedModel> OpenQuantizedExport(const std::string& dir, runtime::StreamerOptions options = {});

}  // namespace quark::quantize
