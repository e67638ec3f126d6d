#include "core/export/hf_quark_layout.h"

#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/storage_dtype.h"
#include "core/numerics/packing.h"

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
  if (w.IsMx()) {
    auto packed = PackedLength(m, element, in, "in_features");
    if (!packed.ok()) return packed.status();
    t.push_back({m + ".weight", {CodeDType(element)}, {out, *packed}});
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

absl::StatusOr<StDType> StDTypeOf(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return StDType::kF32;
    case at::kHalf: return StDType::kF16;
    case at::kBFloat16: return StDType::kBF16;
    default: return absl::InvalidArgumentError(StrCat("dtype ", c10::toString(dtype), " is not F32, F16 or BF16"));
  }
}

absl::StatusOr<at::ScalarType> AtenFloatOf(StDType dtype) {
  switch (dtype) {
    case StDType::kF32: return at::kFloat;
    case StDType::kF16: return at::kHalf;
    case StDType::kBF16: return at::kBFloat16;
    default: return absl::InvalidArgumentError(StrCat("dtype ", checkpoint::StDTypeName(dtype), " is not a float type"));
  }
}

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

at::ScalarType AtenStorageOf(StDType dtype) {
  switch (dtype) {
    case StDType::kF32: return at::kFloat;
    case StDType::kF16: return at::kHalf;
    case StDType::kBF16: return at::kBFloat16;
    case StDType::kI8: return at::kChar;
    case StDType::kI32: return at::kInt;
    case StDType::kI64: return at::kLong;
    default: return at::kByte;  // U8 and the F8 bit patterns
  }
}

namespace {

absl::StatusOr<at::Tensor> ActivationTensor(const std::optional<QuantParams>& params, bool zero_point,
                                            const ExportTensorSpec& spec, const std::string& module) {
  if (!params) return absl::InternalError(StrCat(spec.name, ": the static activation of ", module, " was never calibrated"));
  const at::Tensor& src = zero_point ? params->zero_point : params->scale;
  int64_t expected = 1;
  for (int64_t d : spec.shape) expected *= d;
  if (src.numel() != expected) {
    return absl::InternalError(StrCat(spec.name, ": ", src.numel(), " values for ", expected, " planned"));
  }
  return src.reshape(spec.shape);
}

}  // namespace

absl::StatusOr<std::vector<ExportTensor>> LinearExportTensors(const LinearExportData& data, PackMethod pack_method,
                                                              StDType model_dtype, StDType float_scale_dtype) {
  const LayerQuantConfig& c = data.config;
  const at::Tensor& ref = c.weight && !IsCastType(c.weight->dtype) ? data.weight_codes.codes : data.weight;
  if (!ref.defined() || ref.dim() != 2) return absl::InternalError(StrCat(data.module, ".weight: no [out, in] weight to export"));
  auto specs = QuantizedLinearTensors(data.module, c, ref.size(0), ref.size(1), data.bias.defined(), model_dtype,
                                      float_scale_dtype);
  if (!specs.ok()) return specs.status();
  RealQuantized packed;
  if (c.weight && !IsCastType(c.weight->dtype)) {
    auto p = PackForExport(data.weight_codes, *c.weight, pack_method);
    if (!p.ok()) return absl::Status(p.status().code(), StrCat(data.module, ".weight: ", std::string(p.status().message())));
    packed = *std::move(p);
  }
  const bool progressive = c.weight && c.weight->IsProgressive();  // #30 W4A8
  std::vector<ExportTensor> out;
  for (const ExportTensorSpec& spec : *specs) {
    const std::string suffix = spec.name.substr(data.module.size() + 1);
    at::Tensor t;
    if (suffix == "weight") {
      t = packed.codes.defined() ? packed.codes : data.weight;
    } else if (suffix == "weight_scale") {
      t = progressive ? packed.global_scale : packed.scale;
    } else if (suffix == "weight_zero_point" || suffix == "weight_zero_point_2") {
      t = packed.zero_point;
    } else if (suffix == "weight_scale_2") {
      t = progressive ? packed.scale : packed.global_scale;  // W4A8: the int4 scales; NVFP4: the global scale
    } else if (suffix == "input_scale_2") {
      if (!data.input_params || !data.input_params->global_scale.defined()) {
        return absl::InternalError(StrCat(spec.name, ": the NVFP4 input of ", data.module, " was never calibrated"));
      }
      t = data.input_params->global_scale;
    } else if (suffix == "bias") {
      t = data.bias;
    } else {
      const bool input = suffix.rfind("input_", 0) == 0;
      auto a = ActivationTensor(input ? data.input_params : data.output_params,
                                suffix.find("zero_point") != std::string::npos, spec, data.module);
      if (!a.ok()) return a.status();
      t = *std::move(a);
    }
    if (!t.defined()) return absl::InternalError(StrCat(spec.name, ": nothing to write"));
    t = t.to(AtenStorageOf(spec.dtypes[0])).contiguous();
    if (t.sizes().vec() != spec.shape && !(spec.shape.empty() && t.numel() == 1)) {
      return absl::InternalError(StrCat(spec.name, ": shape [", StrJoin(t.sizes().vec(), ", "), "] differs from the planned [",
                                        StrJoin(spec.shape, ", "), "]"));
    }
    out.push_back({spec.name, spec.dtypes[0], t.reshape(spec.shape)});
  }
  return out;
}

std::vector<ModuleInfo> ModulesFromConfig(const checkpoint::ModelConfig& config) {
  std::vector<ModuleInfo> modules;
  for (const checkpoint::TensorSpec& spec : checkpoint::ModelTensors(config)) {
    if (spec.role != checkpoint::TensorRole::kEmbedding && spec.role != checkpoint::TensorRole::kLinearWeight) continue;
    if (checkpoint::IsOutsideForward(config, spec.name)) continue;
    const std::string module = spec.name.substr(0, spec.name.size() - std::string(".weight").size());
    modules.push_back({module, spec.role == checkpoint::TensorRole::kEmbedding ? "Embedding" : "Linear", spec.shape});
  }
  if (config.tie_word_embeddings) {
    const int64_t dim = config.family == checkpoint::ArchFamily::kOpt ? config.word_embed_proj_dim : config.hidden_size;
    modules.push_back({"lm_head", "Linear", {config.vocab_size, dim}});
  }
  return modules;
}

}  // namespace quark::exporter
