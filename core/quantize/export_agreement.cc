#include "core/quantize/export_agreement.h"

#include <string>

#include "core/base/strings.h"
#include "core/config/quant_types.h"
#include "core/numerics/real_quant.h"

namespace quark::quantize {

absl::StatusOr<int64_t> ExportWeightDifferences(const exporter::LinearExportData& data) {
  if (!data.weight_codes.codes.defined() || !data.config.weight || IsCastType(data.config.weight->dtype)) return 0;
  const at::Tensor& fake = data.weight;
  auto exported = Dequantize(data.weight_codes, *data.config.weight, fake.scalar_type());
  if (!exported.ok()) {
    return absl::InvalidArgumentError(StrCat(data.module, ".weight: ", std::string(exported.status().message())));
  }
  if (!exported->sizes().equals(fake.sizes())) {
    return absl::InvalidArgumentError(StrCat(data.module, ".weight: the codes dequantize to ", c10::str(exported->sizes()),
                                             ", the fake-quantized weight is ", c10::str(fake.sizes())));
  }
  // Bit for bit: NaN weights (kept as NaN by both paths) count as equal.
  const at::Tensor same = exported->eq(fake).logical_or(exported->isnan().logical_and(fake.isnan()));
  return fake.numel() - same.sum().item<int64_t>();
}

}  // namespace quark::quantize
