#include "core/export/scale_dtype.h"

#include "core/numerics/quant_params.h"

namespace quark::exporter {

std::optional<at::ScalarType> PackedGroupScaleDtype(const QuantSpec& weight, at::ScalarType model_dtype) {
  const DType element = weight.ElementType();
  if (weight.IsMx() || weight.qscheme != QScheme::kPerGroup || (element != DType::kInt4 && element != DType::kUInt4)) {
    return std::nullopt;
  }
  const at::ScalarType numerics = ScaleDtypeFor(weight, model_dtype);
  if (numerics == at::kHalf || numerics == at::kBFloat16) return numerics;
  return at::kHalf;
}

QuantSpec WeightSpecForExport(const QuantSpec& weight, at::ScalarType model_dtype) {
  const std::optional<at::ScalarType> packed = PackedGroupScaleDtype(weight, model_dtype);
  if (!packed || *packed == ScaleDtypeFor(weight, model_dtype)) return weight;
  QuantSpec rounded = weight;
  rounded.scale_type = ScaleType::kFloat16;
  return rounded;
}

}  // namespace quark::exporter
