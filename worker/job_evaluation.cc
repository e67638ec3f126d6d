#include "worker/job_evaluation.h"

#include <algorithm>

#include "core/eval/evaluation_plan_proto.h"
#include "worker/storage/strings.h"

namespace quark::worker {

std::vector<std::pair<std::string, std::string>> ReadableExports(const std::filesystem::path& output_dir,
                                                                 const std::vector<std::string>& formats) {
  const bool one = formats.size() <= 1;
  std::vector<std::pair<std::string, std::string>> exports;
  const bool hf = formats.empty() || std::find(formats.begin(), formats.end(), "hf_quark") != formats.end();
  if (hf) exports.emplace_back("reloaded", (one ? output_dir : output_dir / "hf_quark").string());
  if (std::find(formats.begin(), formats.end(), "gguf") != formats.end()) {
    exports.emplace_back("gguf", (output_dir / "model.gguf").string());
  }
  if (std::find(formats.begin(), formats.end(), "compressed_tensors") != formats.end()) {  // #30 item 2
    exports.emplace_back("compressed_tensors", (one ? output_dir : output_dir / "compressed_tensors").string());
  }
  return exports;
}

absl::Status CheckJobEvaluation(const PipelineRequest& request, const std::vector<std::string>& formats) {
  const eval::EvaluationPlan plan = eval::PlanFromProto(request.spec.evaluation());
  if (auto s = eval::ValidateEvaluationPlan(plan, "spec.evaluation"); !s.ok()) return s;
  if ((plan.kld || !plan.max_task_drop.empty()) && ReadableExports("", formats).empty()) {
    return absl::InvalidArgumentError(
        "spec.evaluation.kld: compares an export read back with the float model, and spec.export_formats holds "
        "none of hf_quark, gguf, compressed_tensors");
  }
  if (!plan.tasks.empty() && request.tasks_dir.empty()) {
    return absl::FailedPreconditionError(
        "spec.evaluation.tasks: this worker has no task files (start quark-worker with --tasks-dir)");
  }
  return absl::OkStatus();
}

namespace {

// spec.evaluation as the engine's evaluation options, progress fractions from `fraction_lo` to 1.
eval::ModelEvaluationOptions EvaluationOptions(const PipelineRequest& request, const std::vector<std::string>& formats,
                                               ProgressSink& progress, const CancelToken& cancel, double fraction_lo,
                                               const eval::FloatFigures& float_figures) {
  const quark::v1::EvaluationSpec& spec = request.spec.evaluation();
  eval::ModelEvaluationOptions options;
  options.plan = eval::PlanFromProto(spec);
  options.float_model = request.model_dir.string();
  options.exports = ReadableExports(request.output_dir, formats);
  options.text_file = request.evaluation_file.string();
  options.kld_n_ctx = spec.seq_len();
  options.kld_max_chunks = spec.max_windows();
  options.tasks_dir = request.tasks_dir.string();
  options.scratch_dir = request.scratch_dir.string();
  options.cancelled = [&cancel] { return cancel.IsCancelled(); };
  options.on_progress = [&progress, fraction_lo](const eval::EvaluationProgress& p) {
    quark::v1::Progress out;
    out.set_phase("evaluate");
    out.set_layer(p.done);
    out.set_num_layers(p.total);
    out.set_fraction(fraction_lo + (1 - fraction_lo) * p.done / std::max(p.total, 1));
    out.set_eta_seconds(p.eta_seconds);
    out.set_message(p.message);
    progress.Report(out);
  };
  options.float_figures = float_figures;
  return options;
}

}  // namespace

absl::Status EvaluateJobFloat(const PipelineRequest& request, const std::vector<std::string>& formats,
                              ProgressSink& progress, const CancelToken& cancel,
                              const eval::FloatFigures& float_figures) {
  eval::ModelEvaluationOptions options = EvaluationOptions(request, formats, progress, cancel, 0, float_figures);
  if (options.plan.empty()) return absl::OkStatus();
  return eval::EvaluateFloatFigures(options);
}

absl::Status EvaluateJob(const PipelineRequest& request, const std::vector<std::string>& formats,
                         ProgressSink& progress, const CancelToken& cancel, double fraction_lo,
                         PipelineResult& result, const eval::FloatFigures& float_figures) {
  eval::ModelEvaluationOptions options =
      EvaluationOptions(request, formats, progress, cancel, fraction_lo, float_figures);
  if (options.plan.empty()) return absl::OkStatus();
  if (options.plan.task_limit == 0 && !options.plan.tasks.empty()) {
    progress.Log("evaluate: tasks without task_limit score every example of each task file");
  }
  auto report = eval::EvaluateModels(options);
  if (!report.ok()) return report.status();
  for (const auto& [name, value] : report->metrics) result.metrics[name] = value;
  result.evaluation = report->details;
  const nlohmann::json& tasks = report->details.value("tasks", nlohmann::json::object());
  for (const auto& [task, entry] : tasks.items()) {
    const int64_t truncated = entry.value("truncated_requests", int64_t{0});
    if (truncated > 0) {
      progress.Log(str::Cat("evaluate: ", task, ": ", truncated, " requests longer than the model's ",
                            entry.value("max_length", int64_t{0}), " tokens were left-truncated (as lm-eval does)"));
    }
  }
  std::vector<std::string> labels;
  for (const auto& e : options.exports) labels.push_back(e.first);
  result.gate_failure = eval::CheckEvaluationGates(options.plan, labels, result.metrics);
  return absl::OkStatus();
}

}  // namespace quark::worker
