// quarkctl report JOB: what a person reads after a job — float vs the fake-quantized model vs each export read back:
// perplexity, the KLD summary, the task table (with each export's drop), artifact sizes and times, built from the
// job's metrics (names: core/eval/evaluation_plan.h) and, when the manifest is readable, its Δp histograms.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "quark/v1/service.pb.h"

namespace quark::client {

/// The report as JSON: {"job", "state", "error", "model", "models": [...], "perplexity": {label: v},
/// "kld": {label: {"mean", "mean_stderr", "median", "p99", "same_top", "delta_p"}},
/// "tasks": {task: {metric: {label: v}}}, "artifacts": [{"uri", "size_bytes"}], "size_bytes", "seconds": {...},
/// "gate": {"passed", "failure"}, "delta_p_histogram": {label: {"lo", "hi", "counts"}}}. `manifest` may be null
/// (no histograms then). Model labels: float, fake_quant (ppl_after), reloaded (the HF-quark export), gguf.
nlohmann::json BuildJobReport(const quark::v1::Job& job, const nlohmann::json& manifest);

/// Plain text tables, with a bar per task and model (accuracy) and the Δp histograms as text.
std::string ReportText(const nlohmann::json& report);

/// The same tables in Markdown.
std::string ReportMarkdown(const nlohmann::json& report);

/// An SVG picture: task accuracy per model as grouped bars, and each export's Δp histogram when present.
std::string ReportSvg(const nlohmann::json& report);

}  // namespace quark::client
