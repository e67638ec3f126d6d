#include "core/numerics/packing.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/numerics/quant_layout.h"
#include "kernels/cpu/mx_kernels.h"
#include "kernels/cpu/pack_kernels.h"

namespace quark {
namespace {

const kernels::Int4Order& OrderOf(PackMethod method) {
  return method == PackMethod::kReorder ? kernels::kInt4Reorder : kernels::kInt4Sequential;
}

absl::Status CheckLastDim(const at::Tensor& t, const std::string& field, int64_t multiple, at::ScalarType want) {
  if (!t.defined() || t.dim() == 0) return absl::InvalidArgumentError(absl::StrCat(field, ": needs at least 1 dim"));
  if (t.size(-1) % multiple != 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": last dimension ", t.size(-1), " of ", ShapeString(t.sizes()),
                                                   " is not a multiple of ", multiple));
  }
  if (want != at::kChar && t.scalar_type() != want) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": dtype ", c10::toString(t.scalar_type()), ", expected ",
                                                   c10::toString(want)));
  }
  return absl::OkStatus();
}

std::vector<int64_t> WithLast(at::IntArrayRef sizes, int64_t last) {
  std::vector<int64_t> s(sizes.begin(), sizes.end());
  s.back() = last;
  return s;
}

bool IsInt4(DType d) { return d == DType::kInt4 || d == DType::kUInt4; }

// Packs element codes of a float / MX element format along the last axis.
absl::StatusOr<at::Tensor> PackElements(const at::Tensor& codes, DType el) {
  if (el == DType::kFp4) return PackFp4(codes);
  if (el == DType::kFp6E2M3 || el == DType::kFp6E3M2) return PackFp6(codes);
  return codes;
}

absl::StatusOr<at::Tensor> UnpackElements(const at::Tensor& bytes, DType el) {
  if (el == DType::kFp4) return UnpackFp4(bytes);
  if (el == DType::kFp6E2M3 || el == DType::kFp6E3M2) return UnpackFp6(bytes);
  return bytes;
}

}  // namespace

absl::StatusOr<at::Tensor> PackInt4(const at::Tensor& codes, PackMethod method) {
  if (auto st = CheckLastDim(codes, "codes", 8, at::kChar); !st.ok()) return st;
  const at::Tensor c = codes.contiguous();
  at::Tensor words = at::empty(WithLast(c.sizes(), c.size(-1) / 8), at::kInt);
  kernels::PackInt4(static_cast<const uint8_t*>(c.data_ptr()), c.numel(), OrderOf(method), words.data_ptr<int32_t>());
  return words;
}

absl::StatusOr<at::Tensor> UnpackInt4(const at::Tensor& words, PackMethod method, bool is_signed) {
  if (auto st = CheckLastDim(words, "qweight", 1, at::kInt); !st.ok()) return st;
  const at::Tensor w = words.contiguous();
  at::Tensor codes = at::empty(WithLast(w.sizes(), w.size(-1) * 8), is_signed ? at::kChar : at::kByte);
  kernels::UnpackInt4(w.data_ptr<int32_t>(), codes.numel(), OrderOf(method), is_signed,
                      static_cast<uint8_t*>(codes.data_ptr()));
  return codes;
}

absl::StatusOr<at::Tensor> PackFp4(const at::Tensor& codes) {
  if (auto st = CheckLastDim(codes, "codes", 2, at::kByte); !st.ok()) return st;
  const at::Tensor c = codes.contiguous();
  at::Tensor out = at::empty(WithLast(c.sizes(), c.size(-1) / 2), at::kByte);
  kernels::PackFp4(c.data_ptr<uint8_t>(), c.numel(), out.data_ptr<uint8_t>());
  return out;
}

absl::StatusOr<at::Tensor> UnpackFp4(const at::Tensor& bytes) {
  if (auto st = CheckLastDim(bytes, "qweight", 1, at::kByte); !st.ok()) return st;
  const at::Tensor b = bytes.contiguous();
  at::Tensor out = at::empty(WithLast(b.sizes(), b.size(-1) * 2), at::kByte);
  kernels::UnpackFp4(b.data_ptr<uint8_t>(), out.numel(), out.data_ptr<uint8_t>());
  return out;
}

absl::StatusOr<at::Tensor> PackFp6(const at::Tensor& codes) {
  if (auto st = CheckLastDim(codes, "codes", 4, at::kByte); !st.ok()) return st;
  const at::Tensor c = codes.contiguous();
  at::Tensor out = at::empty(WithLast(c.sizes(), c.size(-1) / 4 * 3), at::kByte);
  kernels::PackFp6(c.data_ptr<uint8_t>(), c.numel(), out.data_ptr<uint8_t>());
  return out;
}

absl::StatusOr<at::Tensor> UnpackFp6(const at::Tensor& bytes) {
  if (auto st = CheckLastDim(bytes, "qweight", 3, at::kByte); !st.ok()) return st;
  const at::Tensor b = bytes.contiguous();
  at::Tensor out = at::empty(WithLast(b.sizes(), b.size(-1) / 3 * 4), at::kByte);
  kernels::UnpackFp6(b.data_ptr<uint8_t>(), out.numel(), out.data_ptr<uint8_t>());
  return out;
}

absl::StatusOr<at::Tensor> ScaleToE8M0(const at::Tensor& scale) {
  const at::Tensor s = scale.to(at::kFloat).contiguous();
  at::Tensor out = at::empty(s.sizes(), at::kByte);
  const float* sp = s.data_ptr<float>();
  uint8_t* op = out.data_ptr<uint8_t>();
  for (int64_t i = 0; i < s.numel(); ++i) {
    int e = 0;
    const float m = std::frexp(sp[i], &e);  // s = m * 2^e, a power of two has m == 0.5
    if (!(m == 0.5f) || e - 1 < -127 || e - 1 > 127) {
      return absl::InvalidArgumentError(absl::StrCat("scale: element ", i, " = ", sp[i],
                                                     " is not a power of two in [2^-127, 2^127]"));
    }
    op[i] = static_cast<uint8_t>(e - 1 + 127);
  }
  return out;
}

at::Tensor E8M0ToScale(const at::Tensor& e8m0) {
  const at::Tensor c = e8m0.contiguous();
  at::Tensor out = at::empty(c.sizes(), at::kFloat);
  const uint8_t* cp = c.data_ptr<uint8_t>();
  float* op = out.data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) op[i] = cp[i] == 255 ? NAN : kernels::Pow2(static_cast<int>(cp[i]) - 127);
  return out;
}

absl::StatusOr<RealQuantized> PackForExport(const RealQuantized& q, const QuantSpec& spec, PackMethod method) {
  const DType el = spec.ElementType();
  if (spec.IsMx()) {
    auto codes = PackElements(q.codes, el);
    if (!codes.ok()) return codes.status();
    return RealQuantized{*codes, q.scale, at::Tensor()};
  }
  if (IsFloatFormat(el)) {
    auto codes = PackElements(q.codes, el);
    if (!codes.ok()) return codes.status();
    return RealQuantized{*codes, q.scale, at::Tensor(), q.global_scale};  // NVFP4 keeps its global scale
  }
  const at::Tensor zp = q.zero_point.to(at::kInt);
  if (spec.IsProgressive()) {  // #30 W4A8: weight (out, in/8), weight_scale_2 (out), weight_zero_point_2 (out/8)
    auto words = PackInt4(q.codes, method);
    if (!words.ok()) return words.status();
    auto zp_words = PackInt4(zp.to(at::kChar), method);
    if (!zp_words.ok()) return absl::Status(zp_words.status().code(), absl::StrCat("zero_point: ", zp_words.status().message()));
    return RealQuantized{*words, q.scale, *zp_words, q.global_scale};
  }
  if (!IsInt4(el)) return RealQuantized{q.codes, q.scale, zp};
  if (spec.qscheme != QScheme::kPerGroup) {
    auto words = PackInt4(q.codes, method);
    if (!words.ok()) return words.status();
    if (spec.qscheme != QScheme::kPerChannel) return RealQuantized{*words, q.scale, zp};
    // #30: per channel, Quark packs the zero points 8 a word too ([C] -> [C / 8]), in the weight's nibble order.
    auto zp_words = PackInt4(zp.reshape({-1}).to(IsUnsigned(el) ? at::kByte : at::kChar), method);
    if (!zp_words.ok()) return absl::Status(zp_words.status().code(), absl::StrCat("zero_point: ", zp_words.status().message()));
    return RealQuantized{*words, q.scale, *zp_words};
  }
  if (q.codes.dim() != 2 || q.scale.dim() != 2 || (spec.ch_axis && *spec.ch_axis != -1 && *spec.ch_axis != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("codes: per_group int4 export needs a 2-D weight grouped along its "
                                                   "last axis, got ", ShapeString(q.codes.sizes())));
  }
  auto words = PackInt4(q.codes.t(), method);  // (in, out / 8)
  if (!words.ok()) return words.status();
  auto zp_words = PackInt4(zp.t().to(IsUnsigned(el) ? at::kByte : at::kChar), method);  // (in / group, out / 8)
  if (!zp_words.ok()) return zp_words.status();
  return RealQuantized{*words, q.scale.t().contiguous(), *zp_words};
}

absl::StatusOr<RealQuantized> UnpackFromExport(const RealQuantized& packed, const QuantSpec& spec, PackMethod method) {
  const DType el = spec.ElementType();
  if (spec.IsMx() || IsFloatFormat(el)) {
    auto codes = UnpackElements(packed.codes, el);
    if (!codes.ok()) return codes.status();
    at::Tensor c = *codes;
    if (spec.IsMx() && el == DType::kInt8) c = c.view(at::kChar);
    return RealQuantized{c, packed.scale, at::zeros(packed.scale.sizes(), at::kInt), packed.global_scale};
  }
  if (!IsInt4(el)) return packed;
  const bool is_signed = !IsUnsigned(el);
  if (spec.IsProgressive()) {  // #30 W4A8
    auto codes = UnpackInt4(packed.codes, method, true);
    if (!codes.ok()) return codes.status();
    auto zp = UnpackInt4(packed.zero_point, method, true);
    if (!zp.ok()) return zp.status();
    return RealQuantized{*codes, packed.scale, zp->to(at::kInt), packed.global_scale};
  }
  auto codes = UnpackInt4(packed.codes, method, is_signed);
  if (!codes.ok()) return codes.status();
  if (spec.qscheme == QScheme::kPerChannel && packed.zero_point.defined() &&
      packed.zero_point.numel() != packed.scale.numel()) {
    // #30: zero points packed 8 a word ([C / 8]); exports before that wrote them unpacked ([C]), read as they are.
    if (packed.zero_point.numel() * 8 != packed.scale.numel()) {
      return absl::InvalidArgumentError(absl::StrCat("zero_point: ", ShapeString(packed.zero_point.sizes()),
                                                     " is neither the scale's ", ShapeString(packed.scale.sizes()),
                                                     " nor those channels packed 8 a word"));
    }
    auto zp = UnpackInt4(packed.zero_point.reshape({-1}).to(at::kInt), method, is_signed);
    if (!zp.ok()) return zp.status();
    return RealQuantized{*codes, packed.scale, zp->to(at::kInt).reshape(packed.scale.sizes())};
  }
  if (spec.qscheme != QScheme::kPerGroup) return RealQuantized{*codes, packed.scale, packed.zero_point};
  auto zp = UnpackInt4(packed.zero_point, method, is_signed);
  if (!zp.ok()) return zp.status();
  return RealQuantized{codes->t().contiguous(), packed.scale.t().contiguous(), zp->t().to(at::kInt).contiguous()};
}

}  // namespace quark
