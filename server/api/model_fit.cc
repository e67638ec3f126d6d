#include "server/api/model_fit.h"

#include "absl/strings/str_cat.h"
#include "core/config/validation.h"
#include "core/estimate/export_fit.h"
#include "server/api/spec_validation.h"

namespace quark::server {

std::vector<estimate::ExportKind> ExportKindsOf(const google::protobuf::RepeatedField<int>& formats) {
  std::vector<estimate::ExportKind> kinds;
  for (int f : formats) {
    kinds.push_back(f == quark::v1::EXPORT_FORMAT_GGUF                 ? estimate::ExportKind::kGguf
                    : f == quark::v1::EXPORT_FORMAT_ONNX               ? estimate::ExportKind::kOnnx
                    : f == quark::v1::EXPORT_FORMAT_COMPRESSED_TENSORS ? estimate::ExportKind::kCompressedTensors
                                                                       : estimate::ExportKind::kHfQuark);
  }
  if (kinds.empty()) kinds.push_back(estimate::ExportKind::kHfQuark);
  return kinds;
}

std::string ModelFitProblem(const estimate::ModelShape& shape, const quark::Config& config,
                            const quark::v1::JobSpec& spec) {
  for (const ValidationIssue& issue : quark::ValidateConfig(config, &shape.modules)) {
    if (issue.severity == ValidationIssue::Severity::kError) return issue.ToString();
  }
  estimate::GgufArtifactOptions gguf;
  gguf.type = spec.gguf_type();
  gguf.pure = spec.gguf_pure();
  gguf.imatrix = !spec.gguf_imatrix_uri().empty() || spec.gguf_imatrix_from_calibration();
  absl::Status fit = estimate::CheckExportFit(shape, BuildLayerPlan(config, shape.modules),
                                              ExportKindsOf(spec.export_formats()), gguf);
  return fit.ok() ? "" : std::string(fit.message());
}

absl::Status CheckSpecFitsModel(const quark::v1::JobSpec& spec, const estimate::ModelShape& shape) {
  const bool has_preset = spec.quantization_case() == quark::v1::JobSpec::kPreset;
  const bool has_config = spec.quantization_case() == quark::v1::JobSpec::kConfig;
  if (!has_preset && !has_config) return absl::OkStatus();
  absl::StatusOr<quark::Config> config =
      ResolveRequestConfig("spec.", has_config ? &spec.config() : nullptr, has_preset ? &spec.preset() : nullptr,
                           spec.kv_cache_dtype(), spec.exclude());
  if (!config.ok()) return config.status();
  const std::string problem = ModelFitProblem(shape, *config, spec);
  if (problem.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(has_preset ? "spec.preset" : "spec.config", ": the model's shapes do not take ",
                   has_preset ? spec.preset() : std::string("this config"), ": ", problem));
}

}  // namespace quark::server
