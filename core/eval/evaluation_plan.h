// What a job evaluates beyond perplexity (JobSpec.evaluation's tasks, task_limit, kld and gates) and the gates'
// verdict on the figures. No LibTorch: quarkd refuses a bad plan at SubmitJob with the same checks the worker makes.
//
// Metric names (JobResult.metrics), for each model label L — "float", and each export read back: "reloaded" (the
// HF-quark export), "gguf", "compressed_tensors":
//   <task>_<metric>_L, <task>_<metric>_stderr_L   e.g. arc_easy_acc_float, arc_easy_acc_norm_reloaded (tasks)
//   kld_mean_L, kld_median_L, kld_p99_L, kld_same_top_L, kld_delta_p_L   (exports only, against the float model)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace quark::eval {

struct EvaluationPlan {
  std::vector<std::string> tasks;  // names from KnownTasks()
  int64_t task_limit = 0;          // first N examples per task (mmlu: per subject); 0 = all
  std::optional<int64_t> num_fewshot;  // few-shot examples for every task; unset = each task's default (fewshot.h)
  bool kld = false;
  bool has_text = false;                        // evaluation text is given (KLD reads it)
  std::optional<double> max_kld;                // gate on each export's mean KLD
  std::map<std::string, double> max_task_drop;  // gate: task -> largest accuracy drop (float acc - export acc)

  bool empty() const { return tasks.empty() && !kld; }
};

/// INVALID_ARGUMENT naming `prefix`.<field> (e.g. "spec.evaluation.tasks[1]"): an unknown task (listing the known
/// ones), a task named twice, a negative limit, kld without text, a gate on a figure that is not computed (max_kld
/// without kld, max_task_drop on a task not in tasks) or a bound that is negative or not a number.
absl::Status ValidateEvaluationPlan(const EvaluationPlan& plan, const std::string& prefix);

/// The accuracy metric a task's drop gate compares ("acc"; gsm8k: "exact_match_strict_match").
std::string GatedTaskMetric(const std::string& task);

/// Metric name of figure `metric` of `task` for model `label`: arc_easy_acc_float.
std::string TaskMetricName(const std::string& task, const std::string& metric, const std::string& label);

/// "" when every gate holds on `metrics`, else the first broken gate with its bound and figure:
/// "evaluation gate: max_kld 0.01 < kld_mean_reloaded 0.0234". `labels` are the exports evaluated. A figure the
/// gate needs but `metrics` lacks breaks the gate (named as missing).
std::string CheckEvaluationGates(const EvaluationPlan& plan, const std::vector<std::string>& labels,
                                 const std::map<std::string, double>& metrics);

}  // namespace quark::eval
