#include "core/export/ct_writer.h"

#include <algorithm>

#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/model_config.h"
#include "core/export/ct_checker.h"
#include "core/export/ct_config.h"
#include "core/export/ct_layout.h"
#include "core/export/ct_moe_rules.h"

namespace quark::exporter {

absl::StatusOr<std::unique_ptr<CompressedTensorsExporter>> CompressedTensorsExporter::Create(
    const std::string& model_dir, const std::string& output_dir, const Config& config, const LayerPlan& plan,
    HfQuarkExportOptions options) {
  auto model = checkpoint::LoadModelConfig(model_dir);
  if (!model.ok()) return model.status();
  if (auto s = CtSupportsExperts(*model); !s.ok()) return s;
  std::unique_ptr<CompressedTensorsExporter> e(new CompressedTensorsExporter());
  if (auto s = e->Init(model_dir, output_dir, config, plan, options); !s.ok()) return s;
  return e;
}

absl::StatusOr<std::vector<ExportTensorSpec>> CompressedTensorsExporter::LinearTensors(const std::string& module,
                                                                                       const LayerQuantConfig& config,
                                                                                       int64_t out, int64_t in,
                                                                                       bool has_bias) const {
  return CtLinearTensors(module, config, out, in, has_bias, model_dtype(), FloatScaleDType(config));
}

absl::StatusOr<std::vector<ExportTensor>> CompressedTensorsExporter::PackLinear(const LinearExportData& data) const {
  return CtLinearExportTensors(data, model_dtype(), FloatScaleDType(data.config));
}

absl::StatusOr<nlohmann::ordered_json> CompressedTensorsExporter::MakeQuantizationConfig(
    const LayerPlan& plan, const std::vector<std::string>& excluded) const {
  auto qc = CompressedTensorsConfig(config(), plan);
  if (!qc.ok()) return qc.status();
  // json keeps keys sorted (json.dump(sort_keys=True), as ModelCompressor writes them); ordered_json keeps that order.
  // A scheme vLLM's compressed_tensors loader dispatches to no class is refused here, before any work.
  for (const auto& [name, group] : (*qc)["config_groups"].items()) {
    const std::string format = group.value("format", (*qc)["format"].get<std::string>());
    auto scheme = VllmCtScheme(group, format);
    if (!scheme.ok() && !IsCtMxFormat(format)) {  // MX: a warning (CtVllmLoadWarnings), the library defines it
      return absl::InvalidArgumentError(StrCat("config_groups.", name, " (", format, ", targets ",
                                               group["targets"].dump(), "): ", std::string(scheme.status().message()),
                                               " (vLLM's compressed_tensors path cannot load it)"));
    }
  }
  nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(qc->dump());
  for (const std::string& name : excluded) {
    auto& ignore = ordered["ignore"];
    if (std::find(ignore.begin(), ignore.end(), name) == ignore.end()) ignore.push_back(name);
  }
  // MoE experts: vLLM loads each block's experts as fused tensors with one scheme and a fused-MoE kernel for it; a
  // recipe that breaks that is refused here, before any work, rather than by the checker after the export.
  std::vector<std::string> routed;
  for (const LayerAssignment& a : plan.layers) {
    if (!MoeBlockOf(a.module).empty()) routed.push_back(a.module);
  }
  if (std::vector<std::string> problems = CtMoeProblems(*qc, routed); !problems.empty()) {
    return absl::InvalidArgumentError(StrCat("export_formats: compressed_tensors: the MoE experts break vLLM's "
                                             "fused-MoE rules: ", StrJoin(problems, "; ")));
  }
  return ordered;
}

absl::Status CompressedTensorsExporter::CheckExport(const std::string& dir) const {
  return CheckCompressedTensorsExport(dir);
}

}  // namespace quark::exporter
