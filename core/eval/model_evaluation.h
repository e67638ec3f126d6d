// A job's evaluation beyond perplexity (evaluation_plan.h): after the export, each task is scored on the float
// model and on every export read back, and each export's KL divergence against the float model is measured over
// the evaluation text. Everything streams one layer at a time (task_scoring.h, kld_eval.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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

/// The float model's figures kept elsewhere (#36 item 1: a sweep's children share one float evaluation,
/// worker/float_baseline.h). Each function may be empty: the figure is then computed here and not handed on.
struct FloatFigures {
  /// Task `task`'s float figures as `on_task` was given them ({"metrics": {name: value}, "entry": task JSON}), or
  /// nullopt: the task is scored on the float model here.
  std::function<std::optional<nlohmann::json>(const std::string& task)> task;
  std::function<void(const std::string& task, const nlohmann::json& figures)> on_task;
  /// A local file of the float model's KLD reference rows for this text and KLD options (SaveKldReferenceRows), or
  /// nullopt: the reference pass runs here and `on_kld_rows` is given a file of its rows.
  std::function<std::optional<std::string>()> kld_rows;
  std::function<void(const std::string& rows_file)> on_kld_rows;
  /// A line for the job's events ("float KLD rows refused: ...; computing them here").
  std::function<void(const std::string&)> on_notice;
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
  FloatFigures float_figures;
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

/// The float model's part of EvaluateModels alone, handed to options.float_figures' on_task / on_kld_rows: each task
/// scored on the float model and the KLD reference rows, each only where float_figures does not have it already.
/// A sweep's first child runs it before quantizing so that the others find it (#36 item 1). Errors as EvaluateModels'.
absl::Status EvaluateFloatFigures(const ModelEvaluationOptions& options);

}  // namespace quark::eval
