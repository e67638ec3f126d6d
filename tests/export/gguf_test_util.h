// Drives the GGUF exporter the way the quantize pipeline does (layer streamer, LayerQuantizer, WriteLinear per
// quantized linear and WriteUnquantized per finished layer, Finish), for the tests and gguf_export_tool until the
// pipeline's --export gguf lands.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_writer.h"

namespace quark::testing {

struct GgufTestExport {
  std::string model_dir;
  std::string output_file;
  Config config;  // empty = float weights only
  exporter::GgufExportOptions options;
  /// Sees each quantized linear as the exporter gets it (tests compare the file with the engine's codes).
  std::function<void(const exporter::LinearExportData&)> on_linear;
};

/// Exports and returns Finish's file names; every error of the exporter or the streamer comes back as is.
absl::StatusOr<std::vector<std::string>> ExportGguf(const GgufTestExport& job);

/// A weight-only config over every decoder linear: `preset` ("uint4_wo_32", "int4_wo_32", ...) or "int8_wo_32"
/// (int8 symmetric per group of 32, no preset has it), with `extra_exclude` patterns added to the preset's.
absl::StatusOr<Config> GgufTestConfig(const std::string& preset, const std::vector<std::string>& extra_exclude = {});

/// Writes a small seeded `model_type` model ("qwen2": q/k/v biases, untied lm_head; "mistral"; "llama") into `dir`
/// (config.json, model.safetensors, the stories260K tokenizer.model): hidden 64, 2 layers, 4 heads, 2 KV heads,
/// vocabulary 512, no sliding window.
absl::Status WriteSyntheticModelForGguf(const std::string& model_type, const std::string& dir,
                                        const std::string& tokenizer_model);

/// The bytes of tensor `t` of an opened GGUF file, to compare two files tensor by tensor.
inline std::string TensorBytes(const exporter::gguf::GgufFile& f, const exporter::gguf::TensorInfo& t) {
  return std::string(reinterpret_cast<const char*>(f.TensorData(t)), t.nbytes);
}

}  // namespace quark::testing
