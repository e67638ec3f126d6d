// The tensors HF-quark writes for one quantized linear (names, safetensors dtypes, shapes), without LibTorch: the
// writer and the checker plan with it (hf_quark_layout.h), and quarkd checks at submit that a job's scheme can be
// packed for every linear of the model (core/estimate/export_fit.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"
#include "core/config/quant_spec.h"

namespace quark::exporter {

/// One expected tensor: `dtypes[0]` is what the writer writes; the checker accepts any of `dtypes`.
struct ExportTensorSpec {
  std::string name;
  std::vector<checkpoint::StDType> dtypes;
  std::vector<int64_t> shape;  // empty = scalar
};

/// The tensors of linear `module` ([out, in], bias or not) quantized with `config`. Unquantized parts (no weight
/// spec: the weight; the bias) keep `model_dtype`. `float_scale_dtype` is the dtype written for per-group int4/uint4
/// weight scales (F16 or BF16, see PackedGroupScaleDtype in scale_dtype.h; the checker accepts either); every other
/// scale is F32. INVALID_ARGUMENT naming the module and the dimension when the scheme cannot
/// be packed for this shape (int4 needs multiples of 8, fp4 of 2, fp6 of 4, per_group of the group size).
absl::StatusOr<std::vector<ExportTensorSpec>> QuantizedLinearTensors(const std::string& module,
                                                                    const LayerQuantConfig& config, int64_t out_features,
                                                                    int64_t in_features, bool has_bias,
                                                                    checkpoint::StDType model_dtype,
                                                                    checkpoint::StDType float_scale_dtype);

}  // namespace quark::exporter
