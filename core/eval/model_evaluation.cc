#include "core/eval/model_evaluation.h"

#include <chrono>

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
  explicit StepCounter(const ModelEvaluationOptions& options)
      : options_(options), total_(EvaluationSteps(options.plan, options.exports.size())), start_(Clock::now()) {}

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

absl::Status RunTasks(const ModelEvaluationOptions& options, StepCounter& steps, ModelEvaluationReport& report) {
  std::vector<std::pair<std::string, std::string>> models = {{"float", options.float_model}};
  models.insert(models.end(), options.exports.begin(), options.exports.end());
  for (const std::string& name : options.plan.tasks) {
    auto task = FindTask(name);
    if (!task.ok()) return task.status();
    int64_t num_fewshot = options.plan.num_fewshot.value_or(-1);
    auto docs = LoadFewshotTaskDocs(*task, options.tasks_dir, options.plan.task_limit, num_fewshot);
    if (!docs.ok()) return docs.status();
    report.details["tasks"][name]["num_fewshot"] = num_fewshot;
    for (const auto& [label, path] : models) {
      if (auto s = steps.Start(StrCat("task ", name, " on ", label)); !s.ok()) return s;
      if (auto s = ScoreOn(*task, *docs, label, path, report); !s.ok()) return s;
      steps.Finish();
    }
  }
  return absl::OkStatus();
}

// The float model's pass, then the model's, the float model closed in between (its mapped embeddings and
// vocabulary projection would otherwise stay resident beside the model's: +25% of the pass's peak on a 7B shape).
absl::StatusOr<KldResult> KldAgainstFloat(const std::string& float_path, const std::string& label,
                                          const std::string& path, const std::vector<int64_t>& ids, KldOptions kld) {
  absl::StatusOr<KldReference> rows;
  {
    auto reference = Open("float", float_path);
    if (!reference.ok()) return reference.status();
    kld.reference_hooks = reference->hooks;
    rows = WriteKldReference(*reference->streamer, ids, kld);
    if (!rows.ok()) return rows.status();
  }
  auto model = Open(label, path);
  if (!model.ok()) return model.status();
  kld.model_hooks = model->hooks;
  return ScoreKld(*model->streamer, *rows, kld);
}

absl::Status RunKld(const ModelEvaluationOptions& options, StepCounter& steps, ModelEvaluationReport& report) {
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
  auto ids = tokenizer->EncodeWithBos(*text);
  if (!ids.ok()) return ids.status();
  for (const auto& [label, path] : options.exports) {
    if (auto s = steps.Start(StrCat("kld of ", label, " against float")); !s.ok()) return s;
    KldOptions kld;
    kld.n_ctx = options.kld_n_ctx;
    kld.max_chunks = options.kld_max_chunks;
    kld.scratch_dir = options.scratch_dir;
    absl::StatusOr<KldResult> result = KldAgainstFloat(options.float_model, label, path, *ids, kld);
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
  StepCounter steps(options);
  const auto tasks_start = Clock::now();
  if (auto s = RunTasks(options, steps, report); !s.ok()) return s;
  if (!options.plan.tasks.empty()) report.metrics["seconds_eval_tasks"] = SecondsSince(tasks_start);
  if (options.plan.kld) {
    const auto kld_start = Clock::now();
    if (auto s = RunKld(options, steps, report); !s.ok()) return s;
    report.metrics["seconds_eval_kld"] = SecondsSince(kld_start);
  }
  return report;
}

}  // namespace quark::eval
