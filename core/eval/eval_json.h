// The JSON forms of evaluation results, shared by `quark eval --json` and a job's manifest ("evaluation").
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "core/eval/kld_eval.h"
#include "core/eval/task_scoring.h"

namespace quark::eval {

/// {"value": v, "stderr": e}.
nlohmann::json MeanJson(const MeanAndError& m);

/// Every figure of a KLD run (llama-perplexity's names: kld_mean, kld_median, kld_p99, same_top, delta_p_mean, ...).
nlohmann::json KldJson(const KldResult& result);

/// Histogram of the per-token Δp (the correct token's probability, model minus reference) in `bins` equal bins over
/// [-1, 1]: {"lo": -1, "hi": 1, "counts": [...]}.
nlohmann::json DeltaPHistogramJson(const std::vector<float>& p_diff_values, int bins = 40);

/// A task's metrics {"acc": {"value", "stderr" (null when not computed)}, ...}.
nlohmann::json TaskMetricsJson(const TaskResult& result);

/// The task, its metrics and per example the choice log-likelihoods and the prediction; with `log_samples` also
/// each request's context, continuation, tokens and their log-probs. `docs` are the examples `result` scored.
nlohmann::json TaskResultJson(const TaskResult& result, const std::vector<TaskDoc>& docs, bool log_samples);

}  // namespace quark::eval
