#include "core/eval/model_evaluation.h"

#include <chrono>
#include <filesystem>

#include "core/base/strings.h"
#include "core/eval/eval_json.h"
#include "core/eval/fewshot.h"
#include "core/eval/kld_eval.h"
#include "core/eval/opened_model.h"
#include "core/eval/task_scoring.h"

namespace quark::eval {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Counts steps, reports each as it starts with the estimate of the time left, and checks for a cancel.
class StepCounter {
 public:
  StepCounter(const ModelEvaluationOptions& options, int total)
      : options_(options), total_(total), start_(Clock::now()) {}

  absl::Status Start(const std::string& message) {
    if (options_.cancelled && options_.cancelled())
      return absl::CancelledError(StrCat("evaluation cancelled at ", message));
    if (options_.on_progress) {
      const double eta = done_ > 0 ? SecondsSince(start_) / done_ * (total_ - done_) : 0;
      options_.on_progress({StrCat(message, " (", done_ + 1, "/", total_, ")"), done_, total_, eta});
    }
    return absl::OkStatus();
  }
  void Finish() { ++done_; }

 private:
  const ModelEvaluationOptions& options_;
  int total_;
  int done_ = 0;
  Clock::time_point start_;
};

absl::StatusOr<OpenedModel> Open(const std::string& label, const std::string& path) {
  auto model = OpenModel(path);
  if (!model.ok())
    return absl::Status(model.status().code(),
                        StrCat(label, " model ", path, ": ", std::string(model.status().message())));
  return model;
}

// Scores `task` on the model of `label`, adds its metrics and its JSON.
absl::Status ScoreOn(const TaskInfo& task, const std::vector<TaskDoc>& docs, const std::string& label,
                     const std::string& path, ModelEvaluationReport& report) {
  auto model = Open(label, path);
  if (!model.ok()) return model.status();
  auto tokenizer = OpenModelTokenizer(*model);
  if (!tokenizer.ok()) return tokenizer.status();
  TaskScoreOptions options;
  options.hooks = model->hooks;
  auto result = ScoreTask(task, docs, *model->streamer, **tokenizer, options);
  if (!result.ok())
    return absl::Status(result.status().code(),
                        StrCat(task.name, " on ", label, ": ", std::string(result.status().message())));
  for (const auto& [metric, m] : result->metrics) {
    report.metrics[TaskMetricName(task.name, metric, label)] = m.value;
    if (m.has_stderr) report.metrics[TaskMetricName(task.name, metric + "_stderr", label)] = m.stderr_value;
  }
  nlohmann::json& entry = report.details["tasks"][task.name];
  entry["examples"] = result->examples.size();
  // A prompt longer than the model's context loses its left end, as lm-eval's; the count says how often.
  entry["truncated_requests"] = result->truncated;
  entry["max_length"] = result->max_length;
  entry[label] = TaskMetricsJson(*result);
  entry[label]["seconds"] = result->seconds;
  return absl::OkStatus();
}

void Notice(const FloatFigures& figures, const std::string& line) {
  if (figures.on_notice) figures.on_notice(line);
}

// Kept float figures of a task into the report; false when they are not {"metrics": {name: number}, "entry": {...}}.
bool MergeFloatTask(const std::string& task, const nlohmann::json& figures, ModelEvaluationReport& report) {
  if (!figures.is_object() || !figures.contains("metrics") || !figures["metrics"].is_object() ||
      !figures.contains("entry") || !figures["entry"].is_object() || !figures["entry"].contains("float")) {
    return false;
  }
  for (const auto& [name, value] : figures["metrics"].items()) {
    if (!value.is_number()) return false;
  }
  for (const auto& [name, value] : figures["metrics"].items()) report.metrics[name] = value.get<double>();
  report.details["tasks"][task].update(figures["entry"]);
  return true;
}

// Task `task` on the float model: the kept figures (float_figures.task) or scored here and handed on.
absl::Status FloatTaskScores(const TaskInfo& task, const std::vector<TaskDoc>& docs,
                             const ModelEvaluationOptions& options, ModelEvaluationReport& report) {
  const FloatFigures& figures = options.float_figures;
  if (figures.task) {
    if (std::optional<nlohmann::json> kept = figures.task(task.name)) {
      if (MergeFloatTask(task.name, *kept, report)) return absl::OkStatus();
      Notice(figures, StrCat("float baseline: the kept float scores of task ", task.name,
                             " are malformed; scoring the float model here"));
    }
  }
  if (options.cancelled && options.cancelled()) {
    return absl::CancelledError(StrCat("evaluation cancelled at ", task.name));
  }
  ModelEvaluationReport scored;
  if (auto s = ScoreOn(task, docs, "float", options.float_model, scored); !s.ok()) return s;
  nlohmann::json kept = {{"metrics", scored.metrics}, {"entry", scored.details["tasks"][task.name]}};
  if (figures.on_task) figures.on_task(task.name, kept);
  MergeFloatTask(task.name, kept, report);
  return absl::OkStatus();
}

// Every task on the float model and, unless `float_only`, on every export.
absl::Status RunTasks(const ModelEvaluationOptions& options, StepCounter& steps, ModelEvaluationReport& report,
                      bool float_only) {
  for (const std::string& name : options.plan.tasks) {
    auto task = FindTask(name);
    if (!task.ok()) return task.status();
    int64_t num_fewshot = options.plan.num_fewshot.value_or(-1);
    auto docs = LoadFewshotTaskDocs(*task, options.tasks_dir, options.plan.task_limit, num_fewshot);
    if (!docs.ok()) return docs.status();
    report.details["tasks"][name]["num_fewshot"] = num_fewshot;
    if (auto s = steps.Start(StrCat("task ", name, " on float")); !s.ok()) return s;
    if (auto s = FloatTaskScores(*task, *docs, options, report); !s.ok()) return s;
    steps.Finish();
    if (float_only) continue;
    for (const auto& [label, path] : options.exports) {
      if (auto s = steps.Start(StrCat("task ", name, " on ", label)); !s.ok()) return s;
      if (auto s = ScoreOn(*task, *docs, label, path, report); !s.ok()) return s;
      steps.Finish();
    }
  }
  return absl::OkStatus();
}

// The float model's reference rows: the kept ones (float_figures.kld_rows) when they fit this text and these
// options, else its pass here, its rows handed on. The float model is closed on return.
absl::StatusOr<KldReference> FloatReference(const ModelEvaluationOptions& options, const std::vector<int64_t>& ids,
                                            KldOptions kld) {
  auto reference = Open("float", options.float_model);
  if (!reference.ok()) return reference.status();
  const FloatFigures& figures = options.float_figures;
  if (figures.kld_rows) {
    if (std::optional<std::string> file = figures.kld_rows()) {
      absl::StatusOr<KldReference> kept = OpenKldReferenceRows(*file, reference->streamer->config(), ids, kld);
      if (kept.ok()) return kept;
      Notice(figures, StrCat("float baseline: the kept float KLD rows do not fit (",
                             std::string(kept.status().message()), "); computing them here"));
    }
  }
  // A wait for the kept rows that a cancel ended: no reference pass for an evaluation that stops.
  if (options.cancelled && options.cancelled()) {
    return absl::CancelledError("evaluation cancelled at the KLD reference");
  }
  kld.reference_hooks = reference->hooks;
  absl::StatusOr<KldReference> rows = WriteKldReference(*reference->streamer, ids, kld);
  if (!rows.ok() || !figures.on_kld_rows) return rows;
  const std::string dir = kld.scratch_dir.empty() ? std::filesystem::temp_directory_path().string() : kld.scratch_dir;
  const std::string file = dir + "/float_kld_reference_rows.bin";
  if (absl::Status saved = SaveKldReferenceRows(*rows, file); !saved.ok()) {
    Notice(figures,
           StrCat("float baseline: the float KLD rows are not kept for others: ", std::string(saved.message())));
  } else {
    figures.on_kld_rows(file);
  }
  return rows;
}

// The float model's pass (or kept rows), then the model's, the float model closed in between (its mapped embeddings
// and vocabulary projection would otherwise stay resident beside the model's: +25% of the pass's peak on a 7B shape).
absl::StatusOr<KldResult> KldAgainstFloat(const ModelEvaluationOptions& options, const std::string& label,
                                          const std::string& path, const std::vector<int64_t>& ids, KldOptions kld) {
  absl::StatusOr<KldReference> rows = FloatReference(options, ids, kld);
  if (!rows.ok()) return rows.status();
  auto model = Open(label, path);
  if (!model.ok()) return model.status();
  kld.model_hooks = model->hooks;
  return ScoreKld(*model->streamer, *rows, kld);
}

// The evaluation text as the float model's tokenizer encodes it, BOS first.
absl::StatusOr<std::vector<int64_t>> KldIds(const ModelEvaluationOptions& options) {
  std::unique_ptr<runtime::Tokenizer> tokenizer;
  {
    auto reference = Open("float", options.float_model);
    if (!reference.ok()) return reference.status();
    auto opened = OpenModelTokenizer(*reference);
    if (!opened.ok()) return opened.status();
    tokenizer = *std::move(opened);
  }
  auto text = runtime::ReadTextFile(options.text_file);
  if (!text.ok()) return text.status();
  return tokenizer->EncodeWithBos(*text);
}

KldOptions KldOptionsOf(const ModelEvaluationOptions& options) {
  KldOptions kld;
  kld.n_ctx = options.kld_n_ctx;
  kld.max_chunks = options.kld_max_chunks;
  kld.scratch_dir = options.scratch_dir;
  return kld;
}

absl::Status RunKld(const ModelEvaluationOptions& options, StepCounter& steps, ModelEvaluationReport& report) {
  auto ids = KldIds(options);
  if (!ids.ok()) return ids.status();
  for (const auto& [label, path] : options.exports) {
    if (auto s = steps.Start(StrCat("kld of ", label, " against float")); !s.ok()) return s;
    absl::StatusOr<KldResult> result = KldAgainstFloat(options, label, path, *ids, KldOptionsOf(options));
    if (!result.ok())
      return absl::Status(result.status().code(),
                          StrCat("kld of ", label, ": ", std::string(result.status().message())));
    const KldSummary& s = result->summary;
    report.metrics["kld_mean_" + label] = s.kld.value;
    report.metrics["kld_mean_stderr_" + label] = s.kld.error;
    report.metrics["kld_median_" + label] = s.kld_median;
    report.metrics["kld_p99_" + label] = s.kld_p99;
    report.metrics["kld_same_top_" + label] = s.same_top.value;
    report.metrics["kld_delta_p_" + label] = s.p_diff.value;
    nlohmann::json entry = KldJson(*result);
    entry["delta_p_histogram"] = DeltaPHistogramJson(result->p_diff_values);
    report.details["kld"][label] = entry;
    steps.Finish();
  }
  return absl::OkStatus();
}

}  // namespace

int EvaluationSteps(const EvaluationPlan& plan, size_t exports) {
  return static_cast<int>(plan.tasks.size() * (1 + exports) + (plan.kld ? exports : 0));
}

absl::StatusOr<ModelEvaluationReport> EvaluateModels(const ModelEvaluationOptions& options) {
  if (auto s = ValidateEvaluationPlan(options.plan, "evaluation"); !s.ok()) return s;
  if (options.exports.empty() && (options.plan.kld || !options.plan.max_task_drop.empty())) {
    return absl::FailedPreconditionError(
        "evaluation: no export the engine can read back (hf_quark or gguf) to compare");
  }
  ModelEvaluationReport report;
  report.details = {{"labels", nlohmann::json::array({"float"})}};
  for (const auto& e : options.exports) report.details["labels"].push_back(e.first);
  StepCounter steps(options, EvaluationSteps(options.plan, options.exports.size()));
  const auto tasks_start = Clock::now();
  if (auto s = RunTasks(options, steps, report, /*float_only=*/false); !s.ok()) return s;
  if (!options.plan.tasks.empty()) report.metrics["seconds_eval_tasks"] = SecondsSince(tasks_start);
  if (options.plan.kld) {
    const auto kld_start = Clock::now();
    if (auto s = RunKld(options, steps, report); !s.ok()) return s;
    report.metrics["seconds_eval_kld"] = SecondsSince(kld_start);
  }
  return report;
}

absl::Status EvaluateFloatFigures(const ModelEvaluationOptions& options) {
  if (auto s = ValidateEvaluationPlan(options.plan, "evaluation"); !s.ok()) return s;
  StepCounter steps(options, static_cast<int>(options.plan.tasks.size()) + (options.plan.kld ? 1 : 0));
  ModelEvaluationReport unused;
  if (auto s = RunTasks(options, steps, unused, /*float_only=*/true); !s.ok()) return s;
  if (!options.plan.kld) return absl::OkStatus();
  auto ids = KldIds(options);
  if (!ids.ok()) return ids.status();
  if (auto s = steps.Start("kld reference rows of float"); !s.ok()) return s;
  absl::StatusOr<KldReference> rows = FloatReference(options, *ids, KldOptionsOf(options));
  if (!rows.ok()) {
    return absl::Status(rows.status().code(), StrCat("kld of float: ", std::string(rows.status().message())));
  }
  steps.Finish();
  return absl::OkStatus();
}

}  // namespace quark::eval
