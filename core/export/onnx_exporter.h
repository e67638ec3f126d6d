// The ONNX export (ONNX Runtime): the whole decoder-only model as one graph, quantized as Quark exports it
// (QuantizeLinear -> DequantizeLinear pairs, weights stored quantized; see onnx_quant_nodes.h and onnx_llama_graph.h).
// Written while the model streams: the graph's structure is known from config.json and the LayerPlan, each finished
// layer's weights go to `model.onnx.data` (ONNX external data) as the layer finishes, and the graph itself is
// serialized at Finish. The folder is built as `<output>.partial`, checked by onnx's C++ checker and shape inference
// where the opset allows (onnx 1.12 knows opsets <= 17), and only then renamed to `<output>`. config.json and the
// tokenizer's files are copied beside the model (IsOnnxCompanionFile).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/export/model_exporter.h"

namespace quark::exporter {

struct OnnxExportOptions {
  /// Initializers of at least this many bytes go to external data (Optimum's default threshold).
  uint64_t external_data_threshold = 1024;
  /// past_key_values.N.key/value inputs and present.N.key/value outputs ([batch, kv_heads, seq, head_dim]).
  bool kv_cache = true;
  /// The model file's name in the output folder; external data is `<file_name>.data`.
  std::string file_name = "model.onnx";
  /// The graph reads its own `lm_head.weight` initializer (from the weights given to Finish) although config.json
  /// ties it to the embedding, and the config.json beside it says tie_word_embeddings: false: a rotation made the
  /// two matrices differ (HfQuarkExportOptions::untie_embeddings).
  bool untie_embeddings = false;
};

/// The files of a model folder an ONNX export carries beside model.onnx (ONNX Runtime GenAI and Optimum read them):
/// config.json, generation_config.json and the tokenizer's files; not the weights, calibration data or anything else.
bool IsOnnxCompanionFile(const std::string& file_name);

/// Plans the ONNX export of the Llama-family model in `model_dir` quantized by `config` / `plan`. Errors before any
/// byte is written: INVALID_ARGUMENT naming the module for a scheme ONNX cannot hold (MX, fp4/fp6, float zero
/// points) or that does not fit its shape; UNIMPLEMENTED for OPT or a quantized embedding / lm_head;
/// ALREADY_EXISTS when `output_dir` is a non-empty folder.
absl::StatusOr<std::unique_ptr<ModelExporter>> CreateOnnxExporter(const std::string& model_dir,
                                                                 const std::string& output_dir, const Config& config,
                                                                 const LayerPlan& plan, OnnxExportOptions options = {});

/// The opset the export of `plan` uses: the lowest its schemes need (17, 19 for fp8, 21 for 4-bit and per-group).
absl::StatusOr<int> OnnxExportOpset(const std::string& model_dir, const LayerPlan& plan);

}  // namespace quark::exporter
