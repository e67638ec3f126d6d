#include "core/export/hf_quark_layout.h"

#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/storage_dtype.h"
#include "core/numerics/packing.h"

namespace quark::exporter {

using checkpoint::StDType;

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
