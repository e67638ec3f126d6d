// Quark's quantization as ONNX nodes (checkpoint-format.md, "ONNX"; numerics.md): weights stored quantized behind a
// DequantizeLinear (int8/uint8 per tensor and per channel with `axis`, int4/uint4 and per group with opset 21
// `block_size`, fp8 as FLOAT8E4M3FN / FLOAT8E5M2 from opset 19), static activations as QuantizeLinear ->
// DequantizeLinear with the calibrated scale, dynamic activations as a subgraph that computes the scale exactly as the
// engine does (per tensor, per token, per group), bfloat16 / float16 as Cast pairs. Weights are stored [in, out] so a
// plain MatMul consumes them (the layout ONNX Runtime's DequantizeLinear -> MatMul fusions expect).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/export/hf_quark_layout.h"
#include "core/export/onnx_graph.h"
#include "core/numerics/quant_params.h"

namespace quark::exporter::onnx_export {

/// The lowest opset that holds `config` of linear `module` ([out, in]): 17 when nothing needs more, 19 for fp8, 21
/// for 4-bit types and per-group scales. INVALID_ARGUMENT naming the module and field for what ONNX cannot hold here:
/// MX (shared E8M0 block scales), fp6 / fp4 elements, float (non-integer) zero points, static per-group activations.
absl::StatusOr<int> RequiredOpset(const std::string& module, const LayerQuantConfig& config, int64_t out_features,
                                  int64_t in_features);

/// Writes the weight of `data` ([out, in], quantized or float) as initializers under `data.module` and returns the
/// name of its float32 [in, out] value (a DequantizeLinear or Cast output, or the initializer itself).
absl::StatusOr<std::string> WeightValue(OnnxGraph& g, const LinearExportData& data);

/// A float32 [out, in] weight that is not quantized, as a [in, out] initializer named `name`.
absl::StatusOr<std::string> FloatWeightValue(OnnxGraph& g, const std::string& name, const at::Tensor& weight);

/// `x` (float32, last axis = `width`) quantized and dequantized by `spec` (static: `params` are the calibrated
/// ones); `name` names the new values and initializers ("<module>.input").
absl::StatusOr<std::string> QuantizeActivation(OnnxGraph& g, const std::string& x, int64_t width,
                                               const QuantSpec& spec, const std::optional<QuantParams>& params,
                                               const std::string& name);

}  // namespace quark::exporter::onnx_export
