// A job's evaluation beyond perplexity (evaluation_plan.h): after the export, each task is scored on the float
// model and on every export read back, and each export's KL divergence against the float model is measured over
// the evaluation text. Everything streams one layer at a time (task_scoring.h, kld_eval.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/eval/evaluation_plan.h"

namespace quark::eval {

/// One finished or started step: "task arc_easy on reloaded", step `done` of `total`; `eta_seconds` is the mean
/// time of the steps so far times the steps left (0 before the first ends).
struct EvaluationProgress {
  std::string message;
  int done = 0;
  int total = 0;
  double eta_seconds = 0;
};

struct ModelEvaluationOptions {
  EvaluationPlan plan;
  std::string float_model;  // the HF folder the job quantized
  /// (label, path) of each export read back: an HF-quark folder or a GGUF file (opened_model.h).
  std::vector<std::pair<std::string, std::string>> exports;
  std::string text_file;       // the evaluation text (KLD), tokenized by the float model's tokenizer with BOS
  int64_t kld_n_ctx = 0;       // 0 = min(512, max_position_embeddings)
  int64_t kld_max_chunks = 0;  // 0 = all
  std::string tasks_dir;       // the task files (task_docs.h)
  std::string scratch_dir;     // the KLD's reference rows; empty = the system temp folder
  std::function<void(const EvaluationProgress&)> on_progress;  // may be empty
  std::function<bool()> cancelled;                             // checked between steps -> CANCELLED
};

struct ModelEvaluationReport {
  /// evaluation_plan.h's names, plus seconds_eval_tasks and seconds_eval_kld.
  std::map<std::string, double> metrics;
  /// {"tasks": {task: {"examples": n, "truncated_requests": t, label: {metric: {"value", "stderr"}}}},
  ///  "kld": {label: KldJson + "delta_p_histogram"}, "labels": ["float", ...]}
  nlohmann::json details;
};

/// Steps the plan takes with `exports` exports: tasks × (1 + exports) + (kld ? exports : 0).
int EvaluationSteps(const EvaluationPlan& plan, size_t exports);

/// The plan is checked first (ValidateEvaluationPlan, prefix "evaluation"); task file errors name the file, line
/// and field; model errors name the label and path.
absl::StatusOr<ModelEvaluationReport> EvaluateModels(const ModelEvaluationOptions& options);

}  // namespace quark::eval
