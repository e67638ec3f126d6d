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
// gguf (exact up to the header: metadata and vocabulary are counted as the model folder's other files, the tensor
// table as 64 bytes a tensor): the type of every tensor is the writer's own plan (core/export/gguf_tensor_plan.h:
// engine codes as Q4_1/Q4_0/Q8_0, the other matrices by llama-quantize's mixture for JobSpec.gguf_type with --pure
// and the imatrix as the job has them, its fallbacks, vectors and routers in F32), each tensor padded to 32 bytes.
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

/// What a job asks of its GGUF export (JobSpec gguf_type, gguf_pure, gguf_imatrix_uri or _from_calibration).
struct GgufArtifactOptions {
  std::string type;      // a llama-quantize file type ("Q4_K_M"); "" = the source's dtypes for float weights
  bool pure = false;
  bool imatrix = false;  // an importance matrix is given (llama-quantize's mixture rules look at it)
  bool untie_embeddings = false;  // a rotation unties tied embeddings: output.weight is written
};

/// A GGUF artifact's two parts: the tensor data exactly as the writer lays it out, and the header (metadata,
/// vocabulary and tensor table), approximated.
struct GgufSize {
  uint64_t data_bytes = 0;
  uint64_t header_bytes = 0;
};
absl::StatusOr<GgufSize> GgufArtifactSize(const ModelShape& model, const LayerPlan& plan,
                                          const GgufArtifactOptions& options);

/// Bytes of the artifact of `kind` for the model under `plan` (compressed_tensors: HF-quark's tensors per linear plus
/// weight_shape, without symmetric zero points). UNIMPLEMENTED for ONNX (its graph size is not modelled); for GGUF,
/// the writer's own refusals (a scheme GGUF cannot hold, an architecture it does not take, an unknown file type).
absl::StatusOr<uint64_t> ArtifactBytes(const ModelShape& model, const LayerPlan& plan, ExportKind kind,
                                       const GgufArtifactOptions& gguf = {});

}  // namespace quark::estimate
