// A GGUF block type as a weight quantizer for the engine's searches (#37 item 4): quantize each row with the type's
// byte-exact block kernel (core/export: from_float, ggml's quantize_row_*_ref, what llama-quantize runs without an
// importance matrix) and dequantize it back, so AWQ before llama.cpp's K-quants optimises for what the file holds.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "core/algorithms/smoothing.h"
#include "core/export/gguf_blocks.h"

namespace quark::quantize {

/// dequantize(quantize(w)) of `w` [out, in] in `type`, row by row, in w's dtype (computed in float32, as
/// llama-quantize converts the source rows). INVALID_ARGUMENT when `in` is not a multiple of the type's block size or
/// w is not 2-D.
absl::StatusOr<at::Tensor> GgufFakeQuantize(const at::Tensor& w, exporter::gguf::GgmlType type);

/// The weight elements sharing one scale in `type` (16 for Q2_K, Q3_K, Q6_K; 32 for Q4_K, Q5_K, IQ4_XS and the
/// 32-blocks; the whole row for float types): AWQ's clip search groups by it.
int64_t GgufScaleGroup(exporter::gguf::GgmlType type);

/// The search specs of the linears whose GGUF type is in `types` (HF weight name -> type, as the writer planned
/// them): `weight` groups by GgufScaleGroup, `weight_qdq` is GgufFakeQuantize. `linears`: relative name -> full
/// module name of the layer's linears.
algorithms::LayerQuantSpecs GgufSearchSpecs(const std::map<std::string, std::string>& linears,
                                            const std::map<std::string, exporter::gguf::GgmlType>& types);

}  // namespace quark::quantize
