// compressed-tensors `mxfp4-pack-quantized` and `mxfp8-quantized` (formats-2026.md 2.3/2.4, compressors/mxfp4,
// compressors/mxfp8): OCP MX weights in groups of 32 along K with E8M0 scales stored as uint8 (127 + log2 of the
// power-of-two scale: the engine's E8M0 bytes as they are). MXFP4: weight_packed uint8 [N, K/2], element 2j in the low
// nibble (compressed-tensors' pack_fp4_to_uint8, as Quark and the engine pack); MXFP8: weight float8_e4m3fn [N, K]. No
// global scale, no zero point. compressed-tensors' groups are whole: K % 32 != 0 (the engine pads a tail block) is
// refused naming the module and the rule.
#include "core/base/strings.h"
#include "core/export/ct_families.h"
#include "core/numerics/packing.h"

namespace quark::exporter {
namespace {

using checkpoint::StDType;

absl::Status MxSpecs(const std::string& m, const QuantSpec& w, int64_t out, int64_t in, StDType,
                     std::vector<ExportTensorSpec>& t) {
  const bool fp4 = w.ElementType() == DType::kFp4;
  if (!fp4 && w.ElementType() != DType::kFp8E4M3) {
    return absl::InvalidArgumentError(StrCat(m, ".weight: compressed-tensors' MX formats are mxfp4 and mxfp8 (e4m3), not ",
                                             Name(w.ElementType())));
  }
  if (in % 32 != 0) {
    return absl::InvalidArgumentError(StrCat(m, ".weight: compressed-tensors' MX groups of 32 need in_features % 32 == 0, ",
                                             "got shape [", out, ", ", in, "]"));
  }
  if (fp4) {
    t.push_back({m + ".weight_packed", {StDType::kU8}, {out, in / 2}});
  } else {
    t.push_back({m + ".weight", {StDType::kF8E4M3}, {out, in}});
  }
  t.push_back({m + ".weight_scale", {StDType::kU8}, {out, in / 32}});
  return absl::OkStatus();
}

absl::StatusOr<std::vector<at::Tensor>> MxValues(const RealQuantized& q, const QuantSpec& w, int64_t, int64_t) {
  if (q.scale.scalar_type() != at::kByte) return absl::InternalError("MX weight scales are not E8M0 bytes");
  if (w.ElementType() != DType::kFp4) return std::vector<at::Tensor>{q.codes, q.scale};  // fp8 bit patterns
  auto packed = PackFp4(q.codes.contiguous());
  if (!packed.ok()) return packed.status();
  return std::vector<at::Tensor>{*packed, q.scale};
}

absl::StatusOr<RealQuantized> MxUnpack(const CtStoredTensor& get, const QuantSpec& w, int64_t, int64_t) {
  const bool fp4 = w.ElementType() == DType::kFp4;
  auto stored = get(fp4 ? "weight_packed" : "weight");
  if (!stored.ok()) return stored.status();
  RealQuantized q;
  if (fp4) {
    auto codes = UnpackFp4(stored->contiguous());
    if (!codes.ok()) {
      return absl::InvalidArgumentError(StrCat("weight_packed: ", std::string(codes.status().message())));
    }
    q.codes = *codes;
  } else {
    q.codes = stored->to(at::kByte);  // float8_e4m3fn bytes
  }
  auto scale = get("weight_scale");
  if (!scale.ok()) return scale.status();
  q.scale = scale->to(at::kByte).contiguous();  // E8M0 bytes, as the engine keeps them
  return q;
}

}  // namespace

const CtFamily kCtMx = {{"mxfp4-pack-quantized", "mxfp8-quantized"}, &MxSpecs, &MxValues, &MxUnpack};

}  // namespace quark::exporter
