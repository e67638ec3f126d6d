// The HF-quark tensor plan of one quantized linear without LibTorch (hf_quark_tensor_plan.h).
#include "core/export/hf_quark_tensor_plan.h"

#include "core/base/strings.h"
#include "core/config/e8m0_tiles.h"

namespace quark::exporter {
namespace {

using checkpoint::StDType;

bool IsInt4(DType d) { return d == DType::kInt4 || d == DType::kUInt4; }

StDType CodeDType(DType element) {
  switch (element) {
    case DType::kUInt8: return StDType::kU8;
    case DType::kFp8E4M3: return StDType::kF8E4M3;
    case DType::kFp8E5M2: return StDType::kF8E5M2;
    case DType::kFp4:
    case DType::kFp6E3M2:
    case DType::kFp6E2M3: return StDType::kU8;
    case DType::kInt4:
    case DType::kUInt4: return StDType::kI32;
    default: return StDType::kI8;
  }
}

StDType ZeroPointDType(DType dtype) {
  if (IsInt4(dtype)) return StDType::kI32;
  return IsUnsigned(dtype) ? StDType::kU8 : StDType::kI8;
}

// Packed length of `n` elements along the last axis; an error names the module and the dimension.
absl::StatusOr<int64_t> PackedLength(const std::string& module, DType element, int64_t n, const char* what) {
  int64_t per = 1, num = 1, den = 1;
  if (element == DType::kFp4) {
    per = 2, num = 1, den = 2;
  } else if (element == DType::kFp6E3M2 || element == DType::kFp6E2M3) {
    per = 4, num = 3, den = 4;
  } else if (IsInt4(element)) {
    per = 8, num = 1, den = 8;
  }
  if (n % per != 0) {
    return absl::InvalidArgumentError(StrCat(module, ".weight: ", Name(element), " packs ", per, " values per word, but ",
                                             what, " = ", n, " is not a multiple of ", per));
  }
  return n * num / den;
}

// #30 E8M0 tiles: weight fp8 [N, K] and one E8M0 byte per [R, C] tile. The scale dtype is the one vLLM registers:
// QuarkW8A8Mxfp8 a uint8 parameter (its loader views R > 1 scales as uint8 before repeat_interleave, so F8_E8M0
// bytes load there too, but for R == 1 a copy_ would convert their values), QuarkW8A8Fp8PerBlock's E8M0 key a
// float8_e8m0fnu one (a U8 tensor would be converted by value).
absl::Status AddE8m0TileTensors(const std::string& m, const QuantSpec& w, int64_t out, int64_t in,
                                std::vector<ExportTensorSpec>& t) {
  const auto form = E8m0TileFormOf(w);
  if (!form) {
    return absl::InvalidArgumentError(StrCat(m, ".weight.block_size: E8M0 tiles load in vLLM as [R, 32] (MXFP8) or ",
                                             "[128, 128] (FP8 block), got ", w.block_size.size() == 2
                                                 ? StrCat("[", w.block_size[0], ", ", w.block_size[1], "]")
                                                 : std::string("no [rows, cols]")));
  }
  const int64_t rows = w.block_size[0], cols = w.block_size[1];
  if (*form == E8m0TileForm::kMxfp8 && rows == 1) {
    // 1-D MXFP8 (the mxfp8 preset as Quark declares it): a last partial block is padded as Quark's exporter pads MX
    // (ceil(in / 32) scale columns), as for the MX branch below; VllmQuarkLoadWarnings says vLLM cannot load it.
    t.push_back({m + ".weight", {StDType::kF8E4M3}, {out, in}});
    t.push_back({m + ".weight_scale", {StDType::kU8}, {out, (in + cols - 1) / cols}});
    return absl::OkStatus();
  }
  if (out % rows != 0 || in % cols != 0) {
    return absl::InvalidArgumentError(StrCat(m, ".weight: block_size [", rows, ", ", cols, "] does not tile [", out,
                                             ", ", in, "] (rule: out_features % ", rows, " == 0, in_features % ", cols,
                                             " == 0)"));
  }
  std::vector<StDType> scale_dtypes{StDType::kF8E8M0};
  if (*form == E8m0TileForm::kMxfp8) {
    scale_dtypes = rows > 1 ? std::vector<StDType>{StDType::kU8, StDType::kF8E8M0} : std::vector<StDType>{StDType::kU8};
  }
  t.push_back({m + ".weight", {StDType::kF8E4M3}, {out, in}});
  t.push_back({m + ".weight_scale", scale_dtypes, {out / rows, in / cols}});
  return absl::OkStatus();
}

absl::Status AddWeightTensors(const std::string& m, const QuantSpec& w, int64_t out, int64_t in, StDType model_dtype,
                              StDType float_scale_dtype, std::vector<ExportTensorSpec>& t) {
  const DType element = w.ElementType();
  if (IsCastType(w.dtype)) {
    t.push_back({m + ".weight", {w.dtype == DType::kBFloat16 ? StDType::kBF16 : StDType::kF16}, {out, in}});
    return absl::OkStatus();
  }
  if (w.IsNvfp4()) {
    if (in % 16 != 0) {
      return absl::InvalidArgumentError(StrCat(m, ".weight: NVFP4 needs in_features % 16 == 0, got shape [", out, ", ",
                                               in, "]"));
    }
    t.push_back({m + ".weight", {StDType::kU8}, {out, in / 2}});
    t.push_back({m + ".weight_scale", {StDType::kF8E4M3}, {out, in / 16}});
    t.push_back({m + ".weight_scale_2", {StDType::kF32}, {}});
    return absl::OkStatus();
  }
  if (w.IsProgressive()) {  // #30 W4A8 as Quark writes it (formats-2026.md 9): int4 stage `_2`, fp8 stage plain
    auto packed = PackedLength(m, element, in, "in_features");
    if (!packed.ok()) return packed.status();
    auto packed_out = PackedLength(m, element, out, "out_features (weight_zero_point_2 packs 8 channels a word)");
    if (!packed_out.ok()) return packed_out.status();
    t.push_back({m + ".weight", {StDType::kI32}, {out, *packed}});
    t.push_back({m + ".weight_scale", {StDType::kF32}, {}});
    t.push_back({m + ".weight_scale_2", {StDType::kF32}, {out}});
    t.push_back({m + ".weight_zero_point_2", {StDType::kI32}, {*packed_out}});
    return absl::OkStatus();
  }
  if (IsE8m0Tiles(w)) return AddE8m0TileTensors(m, w, out, in, t);  // #30: before MX (IsMx() is true for it)
  if (w.IsMx()) {
    auto packed = PackedLength(m, element, in, "in_features");
    if (!packed.ok()) return packed.status();
    t.push_back({m + ".weight", {CodeDType(element)}, {out, *packed}});
    // A last partial block is padded, as Quark's exporter pads it (PerBlockMXObserver: reshape_to_blocks), so such
    // a width has ceil(in / 32) scale columns; vLLM and Quark's importer allocate floor(in / 32) and cannot load it
    // (#30: a warning, VllmQuarkLoadWarnings).
    t.push_back({m + ".weight_scale", {StDType::kU8}, {out, (in + 31) / 32}});
    return absl::OkStatus();
  }
  std::vector<int64_t> scale_shape;
  int64_t group = 0;
  if (w.qscheme == QScheme::kPerChannel) {
    const int axis = w.ch_axis.value_or(0);
    scale_shape = {axis == 0 || axis == -2 ? out : in};
  } else if (w.qscheme == QScheme::kPerBlock) {
    if (w.block_size.size() != 2 || out % w.block_size[0] != 0 || in % w.block_size[1] != 0) {
      return absl::InvalidArgumentError(StrCat(m, ".weight: per_block needs block_size [rows, cols] tiling [", out,
                                               ", ", in, "] (rule: out_features % rows == 0, in_features % cols == 0)"));
    }
    scale_shape = {out / w.block_size[0], in / w.block_size[1]};  // vLLM's BlockQuantScaleParameter
  } else if (w.qscheme == QScheme::kPerGroup) {
    group = w.group_size.value_or(-1) == -1 ? in : *w.group_size;
    if (group <= 0 || in % group != 0) {
      return absl::InvalidArgumentError(StrCat(m, ".weight: group_size ", group, " does not divide in_features ", in));
    }
    scale_shape = {out, in / group};
  }
  const bool int4 = IsInt4(element);
  if (int4 && w.qscheme == QScheme::kPerGroup) {
    auto packed_out = PackedLength(m, element, out, "out_features (per_group int4 packs the transposed weight)");
    if (!packed_out.ok()) return packed_out.status();
    t.push_back({m + ".weight", {StDType::kI32}, {in, *packed_out}});
    // checkpoint-format.md: F16/BF16 only (scale_dtype.h says which the writer picks).
    t.push_back({m + ".weight_scale", {float_scale_dtype, StDType::kF16, StDType::kBF16}, {in / group, out}});
    t.push_back({m + ".weight_zero_point", {StDType::kI32}, {in / group, *packed_out}});
    return absl::OkStatus();
  }
  auto packed = PackedLength(m, element, in, "in_features");
  if (!packed.ok()) return packed.status();
  t.push_back({m + ".weight", {CodeDType(element)}, {out, *packed}});
  t.push_back({m + ".weight_scale", {StDType::kF32}, scale_shape});
  if (int4 && w.qscheme == QScheme::kPerChannel) {
    // #30: Quark packs a per-channel int4 zero point 8 a word (Pack_4_bits.pack on the 1-D [C], as int4_fp8's
    // weight_zero_point_2); vLLM loads no per-channel int4, so Quark's importer is the consumer.
    auto packed_zp = PackedLength(m, element, scale_shape[0], "the channel count (weight_zero_point packs 8 a word)");
    if (!packed_zp.ok()) return packed_zp.status();
    t.push_back({m + ".weight_zero_point", {StDType::kI32}, {*packed_zp}});
    return absl::OkStatus();
  }
  if (IsIntegerType(element)) t.push_back({m + ".weight_zero_point", {ZeroPointDType(element)}, scale_shape});
  (void)model_dtype;
  return absl::OkStatus();
}

// Static activation scales: integer per tensor [1] with a zero point, float formats per tensor a scalar.
absl::Status AddActivationTensors(const std::string& m, const QuantSpec& a, const char* prefix, int64_t channels,
                                  std::vector<ExportTensorSpec>& t) {
  // NVFP4: dynamic groups under the calibrated global scale (Quark writes only `input_scale_2`).
  if (a.IsNvfp4()) {
    t.push_back({StrCat(m, ".", prefix, "_scale_2"), {StDType::kF32}, {}});
    return absl::OkStatus();
  }
  if (a.is_dynamic || IsCastType(a.dtype)) return absl::OkStatus();
  const bool integer = IsIntegerType(a.dtype) && !a.IsMx();
  std::vector<int64_t> shape;
  if (a.IsMx() || a.qscheme == QScheme::kPerGroup) {
    return absl::InvalidArgumentError(StrCat(m, ".", prefix, "_tensors: a static ", Name(a.qscheme),
                                             " activation has no export form (use per_tensor or dynamic)"));
  }
  if (a.qscheme == QScheme::kPerChannel) {
    shape = {channels};
  } else if (integer) {
    shape = {1};
  }
  t.push_back({StrCat(m, ".", prefix, "_scale"), {StDType::kF32}, shape});
  if (integer) t.push_back({StrCat(m, ".", prefix, "_zero_point"), {ZeroPointDType(a.dtype)}, shape});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ExportTensorSpec>> QuantizedLinearTensors(const std::string& module,
                                                                    const LayerQuantConfig& config, int64_t out,
                                                                    int64_t in, bool has_bias, StDType model_dtype,
                                                                    StDType float_scale_dtype) {
  std::vector<ExportTensorSpec> t;
  if (config.weight) {
    if (auto s = AddWeightTensors(module, *config.weight, out, in, model_dtype, float_scale_dtype, t); !s.ok()) return s;
  } else {
    t.push_back({module + ".weight", {model_dtype}, {out, in}});
  }
  if (config.input_tensors) {
    if (auto s = AddActivationTensors(module, *config.input_tensors, "input", in, t); !s.ok()) return s;
  }
  if (config.output_tensors) {
    if (auto s = AddActivationTensors(module, *config.output_tensors, "output", out, t); !s.ok()) return s;
  }
  if (has_bias) t.push_back({module + ".bias", {model_dtype}, {out}});
  return t;
}

}  // namespace quark::exporter
