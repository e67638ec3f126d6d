// The one interface every export format implements (HF-quark for vLLM, GGUF for llama.cpp, ONNX for ONNX Runtime).
// The quantize pipeline feeds each exporter as the layer streamer finishes a decoder layer, so a job writes all its
// formats in one pass over the model while holding one layer in memory.
//
// Order of calls for a model with L decoder layers:
//   for each layer i:  WriteLinear(...) for each quantized linear of layer i, then WriteUnquantized(prefix of layer i)
//   Finish()           (writes what remains: embeddings, final norm, lm_head; checks and publishes)
// `weights` always reflects the model as the algorithms left it (rotation, smoothing change norms and embeddings), so
// an exporter never reads the checkpoint file for a tensor's values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/export/hf_quark_layout.h"
#include "core/runtime/weight_source.h"

namespace quark::exporter {

class ModelExporter {
 public:
  virtual ~ModelExporter() = default;

  /// "hf_quark", "gguf" or "onnx": the JobSpec export_formats name.
  virtual std::string_view format() const = 0;
  /// One quantized linear of a decoder layer, as the engine quantized it (codes and parameters, or float weights
  /// for a cast / unquantized spec).
  virtual absl::Status WriteLinear(const LinearExportData& data) = 0;
  /// Every tensor whose HF name starts with `prefix` ("model.layers.3.") and that WriteLinear does not cover (norms,
  /// excluded linears), with the values `weights` holds now.
  virtual absl::Status WriteUnquantized(const std::string& prefix, const runtime::WeightSource& weights) = 0;
  /// Writes everything not written yet (from `weights`), checks the artifact against its consumer's rules and only
  /// then publishes it at the output path. Returns the published file names (relative to the output).
  virtual absl::StatusOr<std::vector<std::string>> Finish(const runtime::WeightSource& weights) = 0;
};

}  // namespace quark::exporter
