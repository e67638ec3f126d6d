// What an exporter needs of a quantized linear once its layer is calibrated: the spec, the float weight and bias,
// the weight's integer codes with their parameters, and the calibrated static input / output (KV-cache) parameters.
#pragma once

#include "absl/status/statusor.h"
#include "core/export/hf_quark_layout.h"
#include "core/quantize/quant_linear.h"

namespace quark::quantize {

/// `q` as exporter::LinearExportData, in host memory whatever device `q` computes on; the codes only for a weight
/// spec that is not a cast (errors of ExportWeight).
absl::StatusOr<exporter::LinearExportData> LinearExportDataOf(const QuantLinear& q);

}  // namespace quark::quantize
