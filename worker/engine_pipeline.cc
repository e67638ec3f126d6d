#include "worker/engine_pipeline.h"

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/config_choice.h"
#include "core/config/proto_convert.h"
#include "core/config/quark_json.h"
#include "core/quantize/quantize_model.h"

namespace quark::worker {
namespace {

// QuantizeModel's phases, in the job API's vocabulary (service.proto, Progress.phase).
std::string JobPhase(const std::string& engine_phase) {
  if (engine_phase == "prepare") return "load";
  if (engine_phase == "quantize") return "quantize";  // each layer: calibrate, quantize, write
  if (engine_phase == "finish" || engine_phase == "done") return "export";
  if (engine_phase.rfind("evaluate", 0) == 0) return "evaluate";
  return engine_phase;
}

absl::StatusOr<Config> ResolveJobConfig(const quark::v1::JobSpec& spec) {
  ConfigChoice choice;
  if (spec.has_config()) {
    QUARK_ASSIGN_OR_RETURN(choice.config, FromProto(spec.config()));
  } else {
    choice.preset = spec.preset();
  }
  choice.kv_cache_dtype = spec.kv_cache_dtype();
  choice.exclude.assign(spec.exclude().begin(), spec.exclude().end());
  return ResolveConfigChoice(choice);
}

absl::Status CheckExportFormats(const quark::v1::JobSpec& spec) {
  for (int i = 0; i < spec.export_formats_size(); ++i) {
    const auto format = spec.export_formats(i);
    if (format != quark::v1::EXPORT_FORMAT_UNSPECIFIED && format != quark::v1::EXPORT_FORMAT_HF_QUARK) {
      return absl::InvalidArgumentError(StrCat("spec.export_formats[", i, "]: ",
                                               quark::v1::ExportFormat_Name(format),
                                               " is not supported by this worker (supported: EXPORT_FORMAT_HF_QUARK)"));
    }
  }
  return absl::OkStatus();
}

QuantizeModelOptions MakeOptions(const PipelineRequest& request, Config config) {
  const auto& spec = request.spec;
  QuantizeModelOptions options;
  options.config = std::move(config);
  options.output_dir = request.output_dir.string();
  options.calibration_file = request.calibration_file.string();
  if (spec.calibration().num_samples() > 0) options.num_calibration_samples = spec.calibration().num_samples();
  if (spec.calibration().seq_len() > 0) options.seq_len = spec.calibration().seq_len();
  if (spec.calibration().seed() != 0) options.seed = spec.calibration().seed();
  options.eval_text_file = request.evaluation_file.string();
  options.eval_seq_len = spec.evaluation().seq_len();
  options.eval_max_windows = spec.evaluation().max_windows();
  return options;
}

class EnginePipeline : public QuantizePipeline {
 public:
  absl::StatusOr<PipelineResult> Run(const PipelineRequest& request, ProgressSink& progress,
                                     const CancelToken& cancel) override {
    QUARK_RETURN_IF_ERROR(CheckExportFormats(request.spec));
    QUARK_ASSIGN_OR_RETURN(Config config, ResolveJobConfig(request.spec));
    QuantizeModelOptions options = MakeOptions(request, std::move(config));
    options.cancelled = [&cancel] { return cancel.IsCancelled(); };
    options.on_progress = [&progress](const QuantizeProgress& p) {
      quark::v1::Progress out;
      out.set_phase(JobPhase(p.phase));
      out.set_layer(p.layer);
      out.set_num_layers(p.num_layers);
      out.set_fraction(p.fraction);
      out.set_eta_seconds(p.eta_seconds);
      out.set_message(p.message.empty() ? p.phase : p.message);
      progress.Report(out);
    };
    QUARK_ASSIGN_OR_RETURN(QuantizeModelReport report, QuantizeModel(request.model_dir.string(), options));
    PipelineResult result;
    result.metrics = std::move(report.metrics);
    result.resolved_config = nlohmann::json::parse(report.quantization_config.dump());
    return result;
  }
};

}  // namespace

std::shared_ptr<QuantizePipeline> MakeEnginePipeline() { return std::make_shared<EnginePipeline>(); }

}  // namespace quark::worker
