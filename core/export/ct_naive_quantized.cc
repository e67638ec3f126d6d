// compressed-tensors `int-quantized` and `float-quantized` (formats-2026.md 2.3, compressors/naive_quantized): the
// codes unpacked in the weight's shape, int8 (signed; unsigned codes shifted by -128 with their zero points) or
// float8_e4m3fn; weight_scale F32 in compressed-tensors' scale shape; weight_zero_point int8 for asymmetric ints.
#include "core/base/strings.h"
#include "core/export/ct_families.h"

namespace quark::exporter {
namespace {

using checkpoint::StDType;

absl::Status NaiveSpecs(const std::string& m, const QuantSpec& w, int64_t out, int64_t in, StDType scale_dtype,
                        std::vector<ExportTensorSpec>& t) {
  const DType el = w.ElementType();
  const bool integer = IsIntegerType(el);
  if (integer && IntegerBits(el) != 8) {
    return absl::InvalidArgumentError(StrCat(m, ".weight: int-quantized stores int8 codes; ", Name(el),
                                             " with activations has no compressed-tensors form vLLM loads"));
  }
  if (!integer && el != DType::kFp8E4M3) {
    return absl::InvalidArgumentError(StrCat(m, ".weight: float-quantized stores float8_e4m3fn, not ", Name(el)));
  }
  auto scale = CtWeightScaleShape(m, w, out, in);
  if (!scale.ok()) return scale.status();
  t.push_back({m + ".weight", {integer ? StDType::kI8 : StDType::kF8E4M3}, {out, in}});
  t.push_back({m + ".weight_scale", {scale_dtype}, *scale});
  if (integer && !w.symmetric) t.push_back({m + ".weight_zero_point", {StDType::kI8}, *scale});
  return absl::OkStatus();
}

absl::StatusOr<std::vector<at::Tensor>> NaiveValues(const RealQuantized& q, const QuantSpec& w, int64_t, int64_t) {
  const DType el = w.ElementType();
  const bool integer = IsIntegerType(el);
  std::vector<at::Tensor> v;
  v.push_back(integer ? CtSignedCodes(q.codes, el) : q.codes);  // fp8: the uint8 bit patterns, written as they are
  v.push_back(q.scale);
  if (integer && !w.symmetric) v.push_back(CtSignedCodes(q.zero_point, el));
  return v;
}

absl::StatusOr<RealQuantized> NaiveUnpack(const CtStoredTensor& get, const QuantSpec& w, int64_t, int64_t) {
  const DType el = w.ElementType();
  const bool integer = IsIntegerType(el);
  if (IsUnsigned(el)) return absl::InternalError(StrCat("int-quantized unpacks signed grids, not ", Name(el)));
  auto weight = get("weight");
  if (!weight.ok()) return weight.status();
  auto scale = get("weight_scale");
  if (!scale.ok()) return scale.status();
  RealQuantized q;
  q.codes = integer ? weight->to(at::kChar) : weight->to(at::kByte);  // int8 codes, float8_e4m3fn bytes
  q.scale = scale->to(at::kFloat);
  if (!integer || w.symmetric) return q;
  auto zp = get("weight_zero_point");
  if (!zp.ok()) return zp.status();
  q.zero_point = zp->to(at::kInt);
  return q;
}

}  // namespace

const CtFamily kCtNaiveQuantized = {{"int-quantized", "float-quantized"}, &NaiveSpecs, &NaiveValues, &NaiveUnpack};

}  // namespace quark::exporter
