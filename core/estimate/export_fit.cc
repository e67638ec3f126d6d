#include "core/estimate/export_fit.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/export/hf_quark_tensor_plan.h"

namespace quark::estimate {
namespace {

absl::Status CheckHfQuarkFit(const ModelShape& model, const LayerPlan& plan) {
  for (size_t i = 0; i < plan.layers.size() && i < model.modules.size(); ++i) {
    const LayerAssignment& a = plan.layers[i];
    // As ArtifactBytes: the exporters quantize the linears of decoder layers only.
    if (a.source == ConfigSource::kExcluded || a.config.Empty() || a.module_type != "Linear") continue;
    if (LayerIndex(a.module) < 0) continue;
    const std::vector<int64_t>& shape = model.modules[i].weight_shape;
    if (shape.size() != 2) continue;
    absl::StatusOr<std::vector<exporter::ExportTensorSpec>> tensors = exporter::QuantizedLinearTensors(
        a.module, a.config, shape[0], shape[1], false, model.model_dtype, checkpoint::StDType::kF16);
    if (!tensors.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("hf_quark: ", a.module, " (weight [", absl::StrJoin(shape, ", "),
                                                     "], ", a.SourceLabel(), "): ", tensors.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckExportFit(const ModelShape& model, const LayerPlan& plan, const std::vector<ExportKind>& kinds,
                            const GgufArtifactOptions& gguf) {
  for (ExportKind kind : kinds) {
    if (kind == ExportKind::kHfQuark) {
      if (absl::Status s = CheckHfQuarkFit(model, plan); !s.ok()) return s;
    } else if (kind == ExportKind::kGguf) {
      absl::StatusOr<GgufSize> size = GgufArtifactSize(model, plan, gguf);
      if (!size.ok() && size.status().code() == absl::StatusCode::kInvalidArgument) {
        return absl::InvalidArgumentError(absl::StrCat("gguf: ", size.status().message()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace quark::estimate
