// The job's evaluation beyond perplexity (spec.evaluation.tasks / kld and their gates), run by the engine pipeline
// after QuantizeModel has written the exports: the float model and each export the engine reads back (hf_quark,
// gguf, compressed_tensors) are scored (core/eval/model_evaluation.h); progress phase "evaluate" per step with the time left.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/eval/model_evaluation.h"
#include "worker/cancel_token.h"
#include "worker/quantize_pipeline.h"

namespace quark::worker {

/// (label, path) of the exports the engine reads back, in output_dir's layout for `formats` (engine names):
/// one format = output_dir itself (GGUF: output_dir/model.gguf), several = output_dir/hf_quark, output_dir/model.gguf,
/// output_dir/compressed_tensors. "reloaded" is the HF-quark export, "gguf" the GGUF, "compressed_tensors" the
/// compressed-tensors export (#30); ONNX is not read back.
std::vector<std::pair<std::string, std::string>> ReadableExports(const std::filesystem::path& output_dir,
                                                                 const std::vector<std::string>& formats);

/// Before any work: spec.evaluation's plan is valid (eval::ValidateEvaluationPlan, naming spec.evaluation.<field>)
/// and, when it compares exports (kld, max_task_drop), `formats` hold one the engine reads back; tasks need the
/// worker's tasks_dir (FAILED_PRECONDITION without one).
absl::Status CheckJobEvaluation(const PipelineRequest& request, const std::vector<std::string>& formats);

/// Runs spec.evaluation's tasks and KLD, merging the figures into result.metrics, the details into
/// result.evaluation and a broken gate into result.gate_failure. Progress fractions run from `fraction_lo` to 1.
/// `float_figures`: the float model's figures kept by a sweep's shared baseline (worker/float_baseline.h), or empty.
absl::Status EvaluateJob(const PipelineRequest& request, const std::vector<std::string>& formats,
                         ProgressSink& progress, const CancelToken& cancel, double fraction_lo, PipelineResult& result,
                         const eval::FloatFigures& float_figures = {});

/// The float model's part of spec.evaluation alone (eval::EvaluateFloatFigures), handed to `float_figures`: a
/// sweep's first child runs it before quantizing (#36 item 1).
absl::Status EvaluateJobFloat(const PipelineRequest& request, const std::vector<std::string>& formats,
                              ProgressSink& progress, const CancelToken& cancel, const eval::FloatFigures& float_figures);

}  // namespace quark::worker
