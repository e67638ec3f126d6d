// The tensors of a compressed-tensors export (formats-2026.md 2.3) for one quantized linear: names, safetensors dtypes
// and shapes per compression format, and the tensors themselves from the engine's real-quantized codes. One table row
// per format family (ct_families.h): pack-quantized (int weight-only, packed along K into int32, offset-binary),
// int-quantized / float-quantized (codes as they are: int8, float8_e4m3fn), nvfp4-pack-quantized. The writer plans
// with CtLinearTensors before the first byte and the checker compares a read-back folder with the same table.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"
#include "core/config/quant_spec.h"
#include "core/export/hf_quark_layout.h"

namespace quark::exporter {

/// The tensors of linear `module` ([out, in]) quantized with `config`, in write order: the weight's tensors by the
/// format CtFormatOf gives, then `input_scale` / `input_zero_point` (static int or fp8 input) or `input_global_scale`
/// (NVFP4 input), then the bias in `model_dtype`. `float_scale_dtype` is the dtype of per-group int4/uint4 scales (the
/// numerics' 16-bit scales, scale_dtype.h); every other scale is F32 (the numerics' scales widened exactly).
/// INVALID_ARGUMENT naming the module, its shape and the rule when the format cannot hold this shape; UNIMPLEMENTED
/// naming the field for a format this writer does not produce (MX).
absl::StatusOr<std::vector<ExportTensorSpec>> CtLinearTensors(const std::string& module, const LayerQuantConfig& config,
                                                              int64_t out_features, int64_t in_features, bool has_bias,
                                                              checkpoint::StDType model_dtype,
                                                              checkpoint::StDType float_scale_dtype);

/// Packs `data` (the engine's codes and parameters) into the tensors CtLinearTensors lists, in that order, with the
/// same dtypes and shapes (checked: INTERNAL naming the tensor). GPTQ/AWQ codes go in as they are (no re-rounding).
absl::StatusOr<std::vector<ExportTensor>> CtLinearExportTensors(const LinearExportData& data,
                                                                checkpoint::StDType model_dtype,
                                                                checkpoint::StDType float_scale_dtype);

/// compressed-tensors' pack_to_int32: codes [rows, n] (int8 values in [-2^(b-1), 2^(b-1)-1] for `is_signed`, else
/// unsigned values in [0, 2^b - 1]) -> int32 [rows, ceil(n * b / 32)], element i at bits i*b of the row's bit string
/// (spilling into the next word), stored offset-binary (signed q + 2^(b-1); unsigned codes are that already).
/// `bits` in 1..8.
absl::StatusOr<at::Tensor> CtPackToInt32(const at::Tensor& codes, int bits, bool is_signed);
/// Inverse of CtPackToInt32 for `n` elements per row: the stored offset-binary values as int32 (no offset removed).
absl::StatusOr<at::Tensor> CtUnpackFromInt32(const at::Tensor& words, int bits, int64_t n);

}  // namespace quark::exporter
