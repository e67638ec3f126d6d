// DeepSeek-V3's GGUF export inside the quantize pipeline (`quark quantize --export gguf`): llama.cpp's deepseek2 layout
// (gguf_deepseek.h) written at Finish from the model as the run left it. A linear the engine quantized enters as its
// dequantized weight (the fake-quantized values the run evaluated), a float one as it is; the file is then F32 (those
// values exactly) or Q8_0 (`gguf_type` Q8_0: every 2-D weight re-blocked by ggml's Q8_0, the router and norms F32).
// Unlike the dense families' exporter it does not write engine codes losslessly (uint4 g32 -> Q4_1 ...): deepseek2's
// split kv_b_proj and stacked experts are built whole. Not streamed: the quantized linears' float weights are held
// until Finish (fine for the tiny and few-layer shapes; the 671B model would need the streamed writer).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/export/gguf_writer.h"
#include "core/export/model_exporter.h"

namespace quark::exporter {

/// Plans the deepseek2 GGUF of `model_dir` (a deepseek_v3 folder with tokenizer.model). Errors before any byte is
/// written: INVALID_ARGUMENT naming gguf_type for a type other than F32 / Q8_0, gguf_imatrix for an importance
/// matrix (Q8_0 ignores one; no other type is written), a module whose activations or KV cache the plan quantizes or
/// that is not a decoder layer's linear (GGUF stores weights only), what deepseek2 cannot express (the config field,
/// gguf_deepseek.h), a missing tokenizer.model; ALREADY_EXISTS when `output_file` exists.
absl::StatusOr<std::unique_ptr<ModelExporter>> CreateDeepseekGgufExporter(const std::string& model_dir,
                                                                          const std::string& output_file,
                                                                          const LayerPlan& plan,
                                                                          const GgufExportOptions& options);

}  // namespace quark::exporter
