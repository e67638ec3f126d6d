#include "core/quantize/linear_export_data.h"

#include "core/config/quant_types.h"
#include "core/numerics/quant_params.h"

namespace quark::quantize {

namespace {

at::Tensor OnHost(const at::Tensor& t) { return t.defined() ? t.cpu() : t; }

}  // namespace

absl::StatusOr<exporter::LinearExportData> LinearExportDataOf(const QuantLinear& q) {
  // The exporters' boundary: whatever device the layer computed on, the data is in host memory from here on.
  exporter::LinearExportData data;
  data.module = q.name();
  data.config = q.config();
  data.weight = OnHost(q.weight());
  data.bias = OnHost(q.bias());
  if (q.input_quantizer() && q.input_quantizer()->params()) {
    data.input_params = quark::OnHost(*q.input_quantizer()->params());
  }
  if (q.output_quantizer() && q.output_quantizer()->params()) {
    data.output_params = quark::OnHost(*q.output_quantizer()->params());
  }
  if (q.config().weight && !IsCastType(q.config().weight->dtype)) {
    auto codes = q.ExportWeight();
    if (!codes.ok()) return codes.status();
    data.weight_codes = *std::move(codes);
  }
  return data;
}

}  // namespace quark::quantize
