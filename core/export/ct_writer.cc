#include "core/export/ct_writer.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "core/algorithms/hadamard.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/online_rotation.h"
#include "core/export/ct_checker.h"
#include "core/export/ct_config.h"
#include "core/export/ct_layout.h"
#include "core/export/ct_moe_rules.h"
#include "core/export/ct_transform.h"

namespace quark::exporter {
namespace {

// The linears R4's transform targets ("re:.*mlp.down_proj$" in CtR4TransformConfig).
bool IsR4Target(const std::string& module) { return absl::EndsWith(module, ".mlp.down_proj"); }

// compressed-tensors shares one matrix per (scheme, size) among the modules it targets (HadamardFactory caches it)
// and declares the others tied (_register_tied_transform_weights: `_tied_weights_keys` to the first module's), so
// save_pretrained stores it once, under the first module in named_modules order: the first decoder layer's down_proj.
std::string CtR4MatrixOwner(const checkpoint::ModelConfig& model) {
  return checkpoint::LayerPrefix(model, 0) + "mlp.down_proj";
}

}  // namespace

absl::StatusOr<std::unique_ptr<CompressedTensorsExporter>> CompressedTensorsExporter::Create(
    const std::string& model_dir, const std::string& output_dir, const Config& config, const LayerPlan& plan,
    HfQuarkExportOptions options) {
  auto model = checkpoint::LoadModelConfig(model_dir);
  if (!model.ok()) return model.status();
  if (auto s = CtSupportsExperts(*model); !s.ok()) return s;
  std::unique_ptr<CompressedTensorsExporter> e(new CompressedTensorsExporter());
  if (HasOnlineR4(config)) {
    // vLLM puts the transform on every down_proj the target matches, quantized or not; a float one would need its
    // matrix written beside a plain copy, which this writer does not do.
    for (const LayerAssignment& a : plan.layers) {
      if (IsR4Target(a.module) && (a.source == ConfigSource::kExcluded || a.config.Empty())) {
        return absl::UnimplementedError(StrCat(a.module, " (from ", a.SourceLabel(), "): left in float under the "
                                               "rotation's r4; the compressed-tensors export writes R4's matrix for "
                                               "quantized down_proj only"));
      }
    }
    e->r4_width_ = model->intermediate_size;
    e->r4_owner_ = CtR4MatrixOwner(*model);
    auto h = algorithms::HadamardMatrix(e->r4_width_);
    if (!h.ok()) return h.status();
    e->r4_matrix_ = h->to(at::kFloat).contiguous();  // +-1: exact in float32
  }
  if (auto s = e->Init(model_dir, output_dir, config, plan, options); !s.ok()) return s;
  return e;
}

absl::StatusOr<std::vector<ExportTensorSpec>> CompressedTensorsExporter::LinearTensors(const std::string& module,
                                                                                       const LayerQuantConfig& config,
                                                                                       int64_t out, int64_t in,
                                                                                       bool has_bias) const {
  auto specs = CtLinearTensors(module, config, out, in, has_bias, model_dtype(), FloatScaleDType(config));
  if (!specs.ok() || r4_width_ == 0 || !IsR4Target(module)) return specs;
  if (module != r4_owner_) return specs;  // tied to the owner's matrix
  if (in != r4_width_) {
    return absl::InvalidArgumentError(StrCat(module, ": in_features ", in, " is not the MLP width ", r4_width_,
                                             " of the rotation's r4"));
  }
  specs->push_back({CtTransformWeightName(module, kCtR4Scheme, "input"), {checkpoint::StDType::kF32}, {in, in}});
  return specs;
}

absl::StatusOr<std::vector<ExportTensor>> CompressedTensorsExporter::PackLinear(const LinearExportData& data) const {
  auto tensors = CtLinearExportTensors(data, model_dtype(), FloatScaleDType(data.config));
  if (!tensors.ok() || r4_width_ == 0 || data.module != r4_owner_) return tensors;
  tensors->push_back({CtTransformWeightName(data.module, kCtR4Scheme, "input"), checkpoint::StDType::kF32, r4_matrix_});
  return tensors;
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
