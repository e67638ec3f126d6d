// compressed-tensors `pack-quantized` (formats-2026.md 2.3/2.4, compressors/pack_quantized): integer weight-only
// schemes. weight_packed int32 [N, ceil(K*b/32)] packed along K, offset-binary (int4 q + 8); weight_scale [N, K/G] /
// [N, 1] / [1]; weight_shape int64 [2] = (N, K); asymmetric groups and channels: weight_zero_point packed along dim 0,
// int32 [ceil(N*b/32), K/G]; a per-tensor zero point stays int8 [1].
#include "core/base/strings.h"
#include "core/export/ct_families.h"
#include "core/export/ct_layout.h"

namespace quark::exporter {
namespace {

using checkpoint::StDType;

int64_t PackedWords(int64_t n, int bits) { return (n * bits + 31) / 32; }

bool PacksZeroPoint(const QuantSpec& w) { return !w.symmetric && w.qscheme != QScheme::kPerTensor; }

absl::Status PackedSpecs(const std::string& m, const QuantSpec& w, int64_t out, int64_t in, StDType scale_dtype,
                         std::vector<ExportTensorSpec>& t) {
  const int bits = IntegerBits(w.ElementType());
  auto scale = CtWeightScaleShape(m, w, out, in);
  if (!scale.ok()) return scale.status();
  t.push_back({m + ".weight_packed", {StDType::kI32}, {out, PackedWords(in, bits)}});
  t.push_back({m + ".weight_scale", {scale_dtype}, *scale});
  t.push_back({m + ".weight_shape", {StDType::kI64}, {2}});
  if (PacksZeroPoint(w)) {
    t.push_back({m + ".weight_zero_point", {StDType::kI32}, {PackedWords(out, bits), scale->back()}});
  } else if (!w.symmetric) {
    t.push_back({m + ".weight_zero_point", {StDType::kI8}, {1}});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<at::Tensor>> PackedValues(const RealQuantized& q, const QuantSpec& w, int64_t out,
                                                     int64_t in) {
  const DType el = w.ElementType();
  const int bits = IntegerBits(el);
  std::vector<at::Tensor> v;
  auto packed = CtPackToInt32(CtSignedCodes(q.codes, el), bits, /*is_signed=*/true);
  if (!packed.ok()) return packed.status();
  v.push_back(*packed);
  v.push_back(q.scale);
  v.push_back(at::tensor(std::vector<int64_t>{out, in}, at::kLong));
  if (PacksZeroPoint(w)) {
    // [N, groups] -> packed along N: pack the transpose along its last axis and transpose back.
    const at::Tensor zp = CtSignedCodes(q.zero_point, el).reshape({out, -1});
    auto zp_packed = CtPackToInt32(zp.t().contiguous(), bits, /*is_signed=*/true);
    if (!zp_packed.ok()) return zp_packed.status();
    v.push_back(zp_packed->t().contiguous());
  } else if (!w.symmetric) {
    v.push_back(CtSignedCodes(q.zero_point, el));
  }
  return v;
}

// Stored offset-binary values back to signed codes (v - 2^(b-1)) as int8: the reader's specs are signed.
at::Tensor SignedCodes(const at::Tensor& stored, int bits) { return (stored - (1 << (bits - 1))).to(at::kChar); }

absl::StatusOr<RealQuantized> PackedUnpack(const CtStoredTensor& get, const QuantSpec& w, int64_t out, int64_t in) {
  const DType el = w.ElementType();
  if (IsUnsigned(el)) return absl::InternalError(StrCat("pack-quantized unpacks signed grids, not ", Name(el)));
  const int bits = IntegerBits(el);
  auto shape = get("weight_shape");
  if (!shape.ok()) return shape.status();
  const at::Tensor nk = shape->to(at::kLong).flatten();
  if (nk.numel() != 2 || nk[0].item<int64_t>() != out || nk[1].item<int64_t>() != in) {
    const std::vector<int64_t> values(nk.data_ptr<int64_t>(), nk.data_ptr<int64_t>() + nk.numel());
    return absl::InvalidArgumentError(
        StrCat("weight_shape: (", StrJoin(values, ", "), "), the module is (", out, ", ", in, ")"));
  }
  auto words = get("weight_packed");
  if (!words.ok()) return words.status();
  auto stored = CtUnpackFromInt32(*words, bits, in);
  if (!stored.ok()) {
    return absl::InvalidArgumentError(StrCat("weight_packed: ", std::string(stored.status().message())));
  }
  auto scale = get("weight_scale");
  if (!scale.ok()) return scale.status();
  RealQuantized q;
  q.codes = SignedCodes(*stored, bits);
  q.scale = scale->to(at::kFloat);
  if (w.symmetric) return q;
  auto zp = get("weight_zero_point");
  if (!zp.ok()) return zp.status();
  if (!PacksZeroPoint(w)) {  // per tensor: int8 [1], already signed
    q.zero_point = zp->to(at::kInt);
    return q;
  }
  // [ceil(N*b/32), groups] packed along N: unpack the transpose along its last axis.
  auto zp_stored = CtUnpackFromInt32(zp->t().contiguous(), bits, out);
  if (!zp_stored.ok()) {
    return absl::InvalidArgumentError(StrCat("weight_zero_point: ", std::string(zp_stored.status().message())));
  }
  q.zero_point = SignedCodes(zp_stored->t().contiguous(), bits).to(at::kInt);
  return q;
}

}  // namespace

absl::StatusOr<at::Tensor> CtPackToInt32(const at::Tensor& codes, int bits, bool is_signed) {
  if (bits < 1 || bits > 8) return absl::InvalidArgumentError(StrCat("pack_to_int32: bits ", bits, " outside 1..8"));
  if (codes.dim() != 2) return absl::InvalidArgumentError("pack_to_int32: codes must be [rows, n]");
  const at::Tensor c = codes.to(at::kInt).contiguous();
  const int64_t rows = c.size(0), n = c.size(1), words = PackedWords(n, bits);
  const int32_t offset = is_signed ? (1 << (bits - 1)) : 0;
  const uint32_t mask = (1u << bits) - 1;
  at::Tensor out = at::zeros({rows, words}, at::kInt);
  const int32_t* src = c.data_ptr<int32_t>();
  auto* dst = reinterpret_cast<uint32_t*>(out.data_ptr<int32_t>());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const int32_t stored = src[r * n + i] + offset;
      if (stored < 0 || static_cast<uint32_t>(stored) > mask) {
        return absl::InvalidArgumentError(
            StrCat("pack_to_int32: code ", src[r * n + i], " at [", r, ", ", i, "] outside the ", bits, "-bit range"));
      }
      const int64_t bit = i * bits;
      const uint64_t shifted = static_cast<uint64_t>(stored) << (bit % 32);
      dst[r * words + bit / 32] |= static_cast<uint32_t>(shifted);
      if ((bit % 32) + bits > 32) dst[r * words + bit / 32 + 1] |= static_cast<uint32_t>(shifted >> 32);
    }
  }
  return out;
}

absl::StatusOr<at::Tensor> CtUnpackFromInt32(const at::Tensor& words, int bits, int64_t n) {
  if (bits < 1 || bits > 8)
    return absl::InvalidArgumentError(StrCat("unpack_from_int32: bits ", bits, " outside 1..8"));
  if (words.dim() != 2 || words.scalar_type() != at::kInt || words.size(1) != PackedWords(n, bits)) {
    return absl::InvalidArgumentError(
        StrCat("unpack_from_int32: words must be int32 [rows, ", PackedWords(n, bits), "]"));
  }
  const at::Tensor w = words.contiguous();
  const int64_t rows = w.size(0), per_row = w.size(1);
  at::Tensor out = at::empty({rows, n}, at::kInt);
  const auto* src = reinterpret_cast<const uint32_t*>(w.data_ptr<int32_t>());
  int32_t* dst = out.data_ptr<int32_t>();
  const uint64_t mask = (1u << bits) - 1;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t bit = i * bits, word = r * per_row + bit / 32;
      uint64_t v = src[word];
      if ((bit % 32) + bits > 32) v |= static_cast<uint64_t>(src[word + 1]) << 32;
      dst[r * n + i] = static_cast<int32_t>((v >> (bit % 32)) & mask);
    }
  }
  return out;
}

const CtFamily kCtPackQuantized = {{"pack-quantized"}, &PackedSpecs, &PackedValues, &PackedUnpack};

}  // namespace quark::exporter
