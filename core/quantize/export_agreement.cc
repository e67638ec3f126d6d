#include "core/quantize/export_agreement.h"

#include <algorithm>
#include <string>

#include "core/base/strings.h"
#include "core/config/quant_types.h"
#include "core/numerics/real_quant.h"

namespace quark::quantize {

namespace {

// Rows compared at once: the check runs at every linear's export, so it must not add a second full-size copy of
// the weight to the streamer's peak (a 7B down_proj in float32 is 180 MB; 256 rows of it are 11 MB).
constexpr int64_t kRowsPerChunk = 256;

// Whether the codes' parameters follow the weight's rows (dim 0), so that a block of rows dequantizes on its own:
// per tensor (one scale for all), per output channel, or groups along the input. Anything else is compared whole.
bool ParamsFollowRows(const RealQuantized& q, const QuantSpec& spec, int64_t rows) {
  if (spec.IsMx()) return false;
  if (spec.qscheme == QScheme::kPerTensor) return q.scale.numel() == 1;
  const int axis = spec.ch_axis.value_or(spec.qscheme == QScheme::kPerChannel ? 0 : 1);
  const bool along_rows = spec.qscheme == QScheme::kPerChannel ? (axis == 0 || axis == -2) : (axis == 1 || axis == -1);
  const auto leads_with_rows = [&](const at::Tensor& t) { return !t.defined() || (t.dim() >= 1 && t.size(0) == rows); };
  return along_rows && leads_with_rows(q.scale) && leads_with_rows(q.zero_point);
}

RealQuantized RowsOf(const RealQuantized& q, int64_t begin, int64_t end, bool per_tensor) {
  const auto rows = [&](const at::Tensor& t) { return per_tensor || !t.defined() ? t : t.slice(0, begin, end); };
  // NVFP4's global scale is one value for the whole tensor: every row range keeps it.
  return RealQuantized{q.codes.slice(0, begin, end), rows(q.scale), rows(q.zero_point), q.global_scale};
}

}  // namespace

absl::StatusOr<int64_t> ExportWeightDifferences(const exporter::LinearExportData& data) {
  if (!data.weight_codes.codes.defined() || !data.config.weight || IsCastType(data.config.weight->dtype)) return 0;
  const QuantSpec& spec = *data.config.weight;
  const at::Tensor& fake = data.weight;
  const RealQuantized& codes = data.weight_codes;
  const int64_t rows = fake.dim() >= 1 ? fake.size(0) : 1;
  const bool chunked = fake.dim() == 2 && codes.codes.dim() == 2 && codes.codes.size(0) == rows &&
                       ParamsFollowRows(codes, spec, rows);
  const int64_t step = chunked ? kRowsPerChunk : rows;
  int64_t differing = 0;
  for (int64_t begin = 0; begin < rows; begin += step) {
    const int64_t end = std::min(rows, begin + step);
    const RealQuantized part = chunked ? RowsOf(codes, begin, end, spec.qscheme == QScheme::kPerTensor) : codes;
    const at::Tensor expected = chunked ? fake.slice(0, begin, end) : fake;
    auto exported = Dequantize(part, spec, fake.scalar_type());
    if (!exported.ok()) {
      return absl::InvalidArgumentError(StrCat(data.module, ".weight: ", std::string(exported.status().message())));
    }
    if (!exported->sizes().equals(expected.sizes())) {
      return absl::InvalidArgumentError(StrCat(data.module, ".weight: the codes dequantize to ",
                                               c10::str(exported->sizes()), ", the fake-quantized weight is ",
                                               c10::str(expected.sizes())));
    }
    // Bit for bit: NaN weights (kept as NaN by both paths) count as equal.
    const at::Tensor same = exported->eq(expected).logical_or(exported->isnan().logical_and(expected.isnan()));
    differing += expected.numel() - same.sum().item<int64_t>();
  }
  return differing;
}

}  // namespace quark::quantize
