#include "core/quantize/linear_export_data.h"

#include "core/config/quant_types.h"

namespace quark::quantize {

absl::StatusOr<exporter::LinearExportData> LinearExportDataOf(const QuantLinear& q) {
  exporter::LinearExportData data;
  data.module = q.name();
  data.config = q.config();
  data.weight = q.weight();
  data.bias = q.bias();
  if (q.input_quantizer() && q.input_quantizer()->params()) data.input_params = *q.input_quantizer()->params();
  if (q.output_quantizer() && q.output_quantizer()->params()) data.output_params = *q.output_quantizer()->params();
  if (q.config().weight && !IsCastType(q.config().weight->dtype)) {
    auto codes = q.ExportWeight();
    if (!codes.ok()) return codes.status();
    data.weight_codes = *std::move(codes);
  }
  return data;
}

}  // namespace quark::quantize
