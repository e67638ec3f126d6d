// The dtype an export stores a weight's scales in, and the weight spec the numerics must run so that the fake-quantized
// model uses exactly those scales (so a reloaded export equals the fake-quantized model).
//
// checkpoint-format.md lists `X.weight_scale` of a per-group int4/uint4 weight as F16/BF16 [in/g, out]: the AWQ/GPTQ
// style int4 kernels that read this layout take 16-bit scales, and so does GGUF (Q4_1's fp16 d and m). A bfloat16
// model keeps bfloat16 scales and a float16 model float16 ones (the numerics' own scale dtype). A float32 model, which
// the table does not name, gets float16: of the two dtypes the spec allows it keeps 3 more mantissa bits than bfloat16,
// and a group's scale max|w| / 7 (or range / 15) of real weights lies far inside float16's range. Every other scheme
// stores F32 scales (the numerics' scales widened exactly).
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "core/config/quant_spec.h"

namespace quark::exporter {

/// The dtype of the exported scales of a per-group int4/uint4 weight of a model computed in `model_dtype`: the
/// numerics' scale dtype (ScaleDtypeFor) when it is float16 or bfloat16, else float16. nullopt for every other
/// weight scheme (MX, per tensor, per channel, other dtypes), whose scales are exported as F32.
std::optional<at::ScalarType> PackedGroupScaleDtype(const QuantSpec& weight, at::ScalarType model_dtype);

/// `weight` with scale_type float16 where PackedGroupScaleDtype rounds a float32 scale to float16; unchanged
/// otherwise. ComputeQuantParams computes an explicit scale_type in float32 and casts at the end, so the scale is
/// exactly the float32 scale rounded to float16 (the zero point stays the one computed from the float32 scale, and
/// the export writes that same pair).
QuantSpec WeightSpecForExport(const QuantSpec& weight, at::ScalarType model_dtype);

}  // namespace quark::exporter
