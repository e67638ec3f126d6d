// Artifact sizes per export format, from the model's shapes and the layer plan alone.
//
// hf_quark (exact up to the safetensors JSON headers, which are estimated): the exporter
// (core/export/hf_quark_writer.cc, hf_quark_layout.cc) replaces each quantized linear of a decoder layer by the
// tensors checkpoint-format.md lists and copies every other tensor in its own dtype, plus the folder's other files:
//   codes     int8/uint8/fp8: out x in bytes; int4/uint4: out x in / 2 (eight per int32); fp4: /2; fp6: x 3/4
//   scales    per_tensor: one f32; per_channel: out f32; per_group: out x in/group (f32, 16-bit for int4/uint4);
//             MX: out x ceil(in/32) bytes (E8M0)
//   zeros     integer types only, the shape of the scales (int32 for int4/uint4 packed eight per word, i8/u8 else)
//   static activations: a scale (and a zero point for integers) per tensor or per channel
// gguf (approximate): quantized linears in the llama.cpp block type their scheme maps to (Q8_0 34 bytes, Q4_0 18,
// Q4_1 20 per 32 weights); other matrices in JobSpec.gguf_type (or their own dtype), vectors in F32.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/estimate/model_shape.h"

namespace quark::estimate {

enum class ExportKind { kHfQuark, kGguf, kOnnx, kCompressedTensors };

std::string_view ExportKindName(ExportKind kind);

/// Bytes of the weight tensors hf_quark writes for one linear [out, in] with `config` (no headers).
uint64_t HfQuarkLinearBytes(const LayerQuantConfig& config, int64_t out, int64_t in, bool has_bias,
                            checkpoint::StDType model_dtype);

/// Bytes of the artifact of `kind` for the model under `plan` (compressed_tensors: HF-quark's tensors per linear plus
/// weight_shape, without symmetric zero points). `gguf_type` as JobSpec.gguf_type ("" = none).
/// UNIMPLEMENTED for ONNX (its graph size is not modelled).
absl::StatusOr<uint64_t> ArtifactBytes(const ModelShape& model, const LayerPlan& plan, ExportKind kind,
                                       const std::string& gguf_type);

}  // namespace quark::estimate
