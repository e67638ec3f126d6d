#include "core/export/ct_layout.h"

#include "core/base/strings.h"
#include "core/export/ct_config.h"
#include "core/export/ct_families.h"
#include "core/export/storage_dtype.h"

namespace quark::exporter {
namespace {

using checkpoint::StDType;

const CtFamily* const kFamilies[] = {&kCtPackQuantized, &kCtNaiveQuantized, &kCtNvfp4, &kCtMx};

// Static activation tensors (formats-2026.md 2.3): input_scale F32 [1] (+ input_zero_point int8 [1] for an
// asymmetric int), NVFP4 inputs input_global_scale F32 [1]; the KV cache's output_scale F32 [1] (vLLM maps
// `k_proj.output_scale` to the attention's k_scale).
absl::Status AddActivationSpecs(const std::string& m, const QuantSpec& a, const char* prefix,
                                std::vector<ExportTensorSpec>& t) {
  if (a.IsNvfp4()) {
    t.push_back({StrCat(m, ".", prefix, "_global_scale"), {StDType::kF32}, {1}});
    return absl::OkStatus();
  }
  if (a.is_dynamic) return absl::OkStatus();
  if (a.qscheme != QScheme::kPerTensor || a.IsMx()) {
    return absl::InvalidArgumentError(StrCat(m, ".", prefix, "_tensors: a static ", Name(a.qscheme),
                                             " activation has no compressed-tensors form (use per_tensor or dynamic)"));
  }
  t.push_back({StrCat(m, ".", prefix, "_scale"), {StDType::kF32}, {1}});
  if (IsIntegerType(a.ElementType()) && !a.symmetric) {
    t.push_back({StrCat(m, ".", prefix, "_zero_point"), {StDType::kI8}, {1}});
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> ActivationValue(const std::string& suffix, const std::optional<QuantParams>& params,
                                           const QuantSpec& spec, const std::string& module) {
  if (!params) return absl::InternalError(StrCat(module, ".", suffix, ": the static activation was never calibrated"));
  if (suffix.find("global_scale") != std::string::npos) {
    if (!params->global_scale.defined()) return absl::InternalError(StrCat(module, ".", suffix, ": no global scale"));
    return at::reciprocal(params->global_scale.to(at::kFloat));
  }
  if (suffix.find("zero_point") != std::string::npos) return CtSignedCodes(params->zero_point, spec.ElementType());
  return params->scale;
}

}  // namespace

const CtFamily* FindCtFamily(std::string_view format) {
  for (const CtFamily* f : kFamilies) {
    for (std::string_view name : f->formats) {
      if (name == format) return f;
    }
  }
  return nullptr;
}

absl::StatusOr<std::vector<int64_t>> CtWeightScaleShape(const std::string& m, const QuantSpec& w, int64_t out,
                                                        int64_t in) {
  switch (w.qscheme) {
    case QScheme::kPerTensor: return std::vector<int64_t>{1};
    case QScheme::kPerChannel: return std::vector<int64_t>{out, 1};
    case QScheme::kPerGroup: {
      const int64_t g = w.group_size.value_or(-1) == -1 ? in : *w.group_size;
      if (g <= 0 || in % g != 0) {
        return absl::InvalidArgumentError(
            StrCat(m, ".weight: group_size ", g, " does not divide in_features of shape [", out, ", ", in, "]"));
      }
      return g == in ? std::vector<int64_t>{out, 1} : std::vector<int64_t>{out, in / g};
    }
    case QScheme::kPerBlock:
      if (w.block_size.size() != 2 || out % w.block_size[0] != 0 || in % w.block_size[1] != 0) {
        return absl::InvalidArgumentError(StrCat(m, ".weight: per_block needs block_size [rows, cols] tiling [", out,
                                                 ", ", in,
                                                 "] (rule: out_features % rows == 0, in_features % cols == 0)"));
      }
      return std::vector<int64_t>{out / w.block_size[0], in / w.block_size[1]};
  }
  return absl::InternalError(StrCat(m, ".weight: unknown qscheme"));
}

at::Tensor CtSignedCodes(const at::Tensor& codes, DType element) {
  const at::Tensor c = codes.to(at::kInt);
  return IsUnsigned(element) ? c - (1 << (IntegerBits(element) - 1)) : c;
}

absl::StatusOr<std::vector<ExportTensorSpec>> CtLinearTensors(const std::string& module, const LayerQuantConfig& config,
                                                              int64_t out, int64_t in, bool has_bias,
                                                              StDType model_dtype, StDType float_scale_dtype) {
  if (!config.weight || IsCastType(config.weight->dtype)) {
    return absl::InvalidArgumentError(StrCat(module, ".weight: compressed-tensors exports quantized weights only (",
                                             config.weight ? "a cast" : "no weight spec", ")"));
  }
  auto format = CtFormatOf(config, module);
  if (!format.ok()) return format.status();
  const CtFamily* family = FindCtFamily(*format);
  if (!family) {
    return absl::UnimplementedError(StrCat(module, ".weight: the ", *format, " format is not written yet"));
  }
  std::vector<ExportTensorSpec> t;
  if (auto s = family->specs(module, *config.weight, out, in, float_scale_dtype, t); !s.ok()) return s;
  if (config.input_tensors) {
    if (auto s = AddActivationSpecs(module, *config.input_tensors, "input", t); !s.ok()) return s;
  }
  if (config.output_tensors) {
    if (auto s = AddActivationSpecs(module, *config.output_tensors, "output", t); !s.ok()) return s;
  }
  if (has_bias) t.push_back({module + ".bias", {model_dtype}, {out}});
  return t;
}

absl::StatusOr<std::vector<ExportTensor>> CtLinearExportTensors(const LinearExportData& data, StDType model_dtype,
                                                                StDType float_scale_dtype) {
  const LayerQuantConfig& c = data.config;
  const at::Tensor& codes = data.weight_codes.codes;
  if (!codes.defined() || codes.dim() != 2) {
    return absl::InternalError(StrCat(data.module, ".weight: no [out, in] codes to export"));
  }
  const int64_t out = codes.size(0), in = codes.size(1);
  auto specs = CtLinearTensors(data.module, c, out, in, data.bias.defined(), model_dtype, float_scale_dtype);
  if (!specs.ok()) return specs.status();
  auto format = CtFormatOf(c, data.module);
  if (!format.ok()) return format.status();
  auto weight = FindCtFamily(*format)->values(data.weight_codes, *c.weight, out, in);
  if (!weight.ok()) {
    return absl::Status(weight.status().code(),
                        StrCat(data.module, ".weight: ", std::string(weight.status().message())));
  }
  std::vector<ExportTensor> result;
  for (size_t i = 0; i < specs->size(); ++i) {
    const ExportTensorSpec& spec = (*specs)[i];
    const std::string suffix = spec.name.substr(data.module.size() + 1);
    at::Tensor t;
    if (i < weight->size()) {
      t = (*weight)[i];
    } else if (suffix == "bias") {
      t = data.bias;
    } else {
      const bool input = suffix.rfind("input_", 0) == 0;
      auto a = ActivationValue(suffix, input ? data.input_params : data.output_params,
                               input ? *c.input_tensors : *c.output_tensors, data.module);
      if (!a.ok()) return a.status();
      t = *a;
    }
    if (!t.defined()) return absl::InternalError(StrCat(spec.name, ": nothing to write"));
    int64_t expected = 1;
    for (int64_t d : spec.shape) expected *= d;
    if (t.numel() != expected) {
      return absl::InternalError(
          StrCat(spec.name, ": ", t.numel(), " values for the planned [", StrJoin(spec.shape, ", "), "]"));
    }
    t = t.to(AtenStorageOf(spec.dtypes[0])).contiguous().reshape(spec.shape);
    result.push_back({spec.name, spec.dtypes[0], t});
  }
  return result;
}

}  // namespace quark::exporter
