// compressed-tensors `nvfp4-pack-quantized` (formats-2026.md 2.3/2.4, compressors/nvfp4): weight_packed uint8 [N, K/2]
// (element 2j in the low nibble, as Quark), weight_scale float8_e4m3fn [N, K/16] (the engine's block scale bytes),
// weight_global_scale F32 [1]: compressed-tensors stores the global scale as a divisor (2688 / amax), the inverse of
// the engine's (and Quark's) dequant multiplier amax / 2688, so it is written as float32 1 / global_scale.
#include "core/base/strings.h"
#include "core/export/ct_families.h"
#include "core/numerics/packing.h"

namespace quark::exporter {
namespace {

using checkpoint::StDType;

absl::Status Nvfp4Specs(const std::string& m, const QuantSpec&, int64_t out, int64_t in, StDType,
                        std::vector<ExportTensorSpec>& t) {
  if (in % 16 != 0) {
    return absl::InvalidArgumentError(
        StrCat(m, ".weight: NVFP4 needs in_features % 16 == 0, got shape [", out, ", ", in, "]"));
  }
  t.push_back({m + ".weight_packed", {StDType::kU8}, {out, in / 2}});
  t.push_back({m + ".weight_scale", {StDType::kF8E4M3}, {out, in / 16}});
  t.push_back({m + ".weight_global_scale", {StDType::kF32}, {1}});
  return absl::OkStatus();
}

absl::StatusOr<std::vector<at::Tensor>> Nvfp4Values(const RealQuantized& q, const QuantSpec&, int64_t, int64_t) {
  auto packed = PackFp4(q.codes.contiguous());
  if (!packed.ok()) return packed.status();
  if (!q.global_scale.defined()) return absl::InternalError("NVFP4 weight without a global scale");
  return std::vector<at::Tensor>{*packed, q.scale, at::reciprocal(q.global_scale.to(at::kFloat)).reshape({1})};
}

// global_scale: the stored divisor (2688 / amax); the reader (ct_source.cc) turns it into the engine's multiplier.
absl::StatusOr<RealQuantized> Nvfp4Unpack(const CtStoredTensor& get, const QuantSpec&, int64_t, int64_t) {
  auto packed = get("weight_packed");
  if (!packed.ok()) return packed.status();
  auto codes = UnpackFp4(packed->contiguous());
  if (!codes.ok()) return absl::InvalidArgumentError(StrCat("weight_packed: ", std::string(codes.status().message())));
  auto scale = get("weight_scale");
  if (!scale.ok()) return scale.status();
  auto global = get("weight_global_scale");
  if (!global.ok()) return global.status();
  return RealQuantized{*codes, scale->contiguous(), at::Tensor(), global->to(at::kFloat).reshape({})};
}

}  // namespace

const CtFamily kCtNvfp4 = {{"nvfp4-pack-quantized"}, &Nvfp4Specs, &Nvfp4Values, &Nvfp4Unpack};

}  // namespace quark::exporter
