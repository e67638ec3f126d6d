// The seam between the worker and the engine: one call that quantizes a local model folder into a local output
// folder. QuantizeJobRunner does everything around it (fetching inputs, temp folders, progress scaling, cancel,
// publishing); an implementation only runs ModelQuantizer + export (+ evaluation).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"
#include "worker/cancel_token.h"
#include "worker/job_runner.h"
#include "worker/storage/object_store.h"

namespace quark::worker {

struct PipelineRequest {
  std::string job_id;
  /// The job's spec as submitted: spec.config or spec.preset, kv_cache_dtype, exclude, calibration
  /// (num_samples, seq_len, seed), evaluation (seq_len, max_windows), export_formats.
  quark::v1::JobSpec spec;
  /// The model in HF layout (config.json, *.safetensors, tokenizer files), on local disk, read-only.
  std::filesystem::path model_dir;
  /// Local copy of spec.calibration.uri; empty = the engine's built-in synthetic calibration text.
  std::filesystem::path calibration_file;
  /// Local copy of spec.evaluation.uri; empty = no perplexity evaluation.
  std::filesystem::path evaluation_file;
  /// Local copy of spec.gguf_imatrix_uri; empty = none.
  std::filesystem::path gguf_imatrix_file;
  /// An empty folder that receives the exported artifact(s); everything in it is published as is.
  /// It must not contain a file named manifest.json (the worker writes that one).
  std::filesystem::path output_dir;
  /// A private scratch folder (removed after the job).
  std::filesystem::path scratch_dir;
  /// Per-layer checkpoints of this job, kept across attempts on this worker (a killed attempt's successor resumes
  /// from its last finished layer); empty = none. The runner removes it once the job is over.
  std::filesystem::path checkpoint_dir;
  // --- #34 item 1: checkpoints in object storage ---
  /// The model and calibration as every worker names them (QuantizeModelOptions::checkpoint_identity), so that a
  /// checkpoint restored from object storage resumes on this worker; empty = this machine's paths.
  std::string checkpoint_identity;
  /// Called after each finished layer's checkpoint is complete in checkpoint_dir (the runner uploads it). May be
  /// empty.
  std::function<void(int64_t finished_layers)> on_layer_checkpointed;
  // --- end #34 item 1 ---
  /// The worker's lm-eval task files (quark-worker --tasks-dir) for spec.evaluation.tasks.
  std::filesystem::path tasks_dir;
  /// Where the engine computes ("cpu", "cuda:N"): EngineDevice of the job and the worker's devices.
  std::string device = "cpu";
  /// #36 item 1: the job's store when the job is a sweep's or a search's child: its float figures are shared with
  /// its siblings through it (worker/float_baseline.h). Null = the job measures the float model itself.
  std::shared_ptr<storage::ObjectStore> float_baseline_store;
};

/// A job that asks for GPUs (spec.resources.gpus > 0) computes on the first CUDA device the worker announced
/// (quark-worker --devices); every other job on the CPU. quarkd leases GPU jobs only to workers with GPUs.
inline std::string EngineDevice(const quark::v1::JobSpec& spec, const std::vector<std::string>& worker_devices) {
  if (spec.resources().gpus() <= 0) return "cpu";
  for (const std::string& device : worker_devices) {
    if (device.rfind("cuda", 0) == 0) return device;
  }
  return "cpu";
}

struct PipelineResult {
  /// e.g. ppl_before, ppl_after, seconds_calibrate; copied into manifest.json and JobResult.metrics.
  std::map<std::string, double> metrics;
  /// The fully resolved quantization Config (preset expanded, kv-cache and exclude applied), as Quark JSON;
  /// written to manifest.json's "config". null = the worker writes the submitted spec's config instead.
  nlohmann::json resolved_config;
  /// spec.evaluation's tasks and KLD in detail (core/eval/model_evaluation.h); written to manifest.json's
  /// "evaluation". null = none asked.
  nlohmann::json evaluation;
  /// Non-empty when an evaluation gate broke ("evaluation gate: ..."): the runner publishes the artifacts with the
  /// manifest marked, then fails the job FAILED_PRECONDITION with this.
  std::string gate_failure;
};

class QuantizePipeline {
 public:
  virtual ~QuantizePipeline() = default;
  /// Quantizes request.model_dir into request.output_dir. Reports progress with fraction 0..1 of the pipeline
  /// alone (the runner rescales it into the job's overall fraction) and phases load / calibrate / quantize /
  /// export / evaluate; checks `cancel` between layers and returns CANCELLED promptly when it fired. Errors name
  /// the field, tensor or file. Must not throw.
  virtual absl::StatusOr<PipelineResult> Run(const PipelineRequest& request, ProgressSink& progress,
                                             const CancelToken& cancel) = 0;
};

}  // namespace quark::worker
