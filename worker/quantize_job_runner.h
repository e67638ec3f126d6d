// The production runner: fetch the model and inputs, run the engine pipeline, publish with manifest.json last.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "worker/checkpoint_mirror.h"
#include "worker/job_runner.h"
#include "worker/lease_storage.h"
#include "worker/quantize_pipeline.h"
#include "worker/storage/model_cache.h"
#include "worker/storage/object_store.h"

namespace quark {
class Ed25519Signer;
}  // namespace quark

namespace quark::worker {

struct QuantizeJobRunnerOptions {
  /// Per-job temp folders go to <work_dir>/jobs/<job id>/ and are removed when the job ends. Per-layer
  /// checkpoints go to <work_dir>/checkpoints/<job id>/: they outlive a killed worker, so that the job's next
  /// attempt on this worker resumes at its last finished layer; removed when the job succeeds or fails for a
  /// reason a retry would not change, and after checkpoint_max_age otherwise.
  std::filesystem::path work_dir;
  std::chrono::hours checkpoint_max_age{24 * 7};
  /// Overall fraction reached after fetching and after the pipeline; upload fills the rest.
  double fetch_fraction = 0.05;
  double pipeline_fraction = 0.95;
  /// Builds the store of a lease that carries storage credentials; null = such leases fail with
  /// FAILED_PRECONDITION (never silently run with the worker's own keys).
  std::shared_ptr<const LeaseStoreFactory> lease_stores;
  /// Signs every published manifest.json (--signing-key; storage/manifest_signature.h); null = unsigned.
  std::shared_ptr<const Ed25519Signer> signer;
  /// The devices this worker announced ("cpu", "cuda:0"), recorded in the manifest.
  std::vector<std::string> devices;
  /// lm-eval task files for spec.evaluation.tasks (quark-worker --tasks-dir).
  std::filesystem::path tasks_dir;
  // --- #34 item 1 ---
  /// Copies each finished layer's checkpoint below <output_uri>/.quark-checkpoints/<job id> (checkpoint_mirror.h)
  /// so that the job's retry on any worker resumes there; removed with the local one. false = local only
  /// (quark-worker --remote-checkpoints=false).
  bool remote_checkpoints = true;
  /// The remote checkpoints' expiry after a failure (quark-worker --checkpoint-expiry-s).
  CheckpointMirrorOptions remote_checkpoint;
  // --- end #34 item 1 ---
};

/// Phases (Progress.phase): "fetch" (model via the cache, calibration and evaluation files), the pipeline's own
/// phases, "upload" (files i/N, then manifest.json). Errors: INVALID_ARGUMENT "spec.model_uri: empty" /
/// "spec.output_uri: empty"; NOT_FOUND "model_uri: file:///x: no such directory"; PERMISSION_DENIED for URIs
/// outside the allowed roots; the store's errors for uploads (no manifest.json then); CANCELLED on cancel.
/// A lease with storage credentials reads and writes through a store made for it (options.lease_stores),
/// dropped when the job ends; its model downloads are cached apart from other credentials'.
class QuantizeJobRunner : public JobRunner {
 public:
  QuantizeJobRunner(QuantizeJobRunnerOptions options, std::shared_ptr<storage::ObjectStore> store,
                    std::shared_ptr<storage::ModelCache> cache, std::shared_ptr<QuantizePipeline> pipeline);

  using JobRunner::Run;
  absl::StatusOr<quark::v1::JobResult> Run(const quark::v1::Job& job, const LeaseContext& lease,
                                           ProgressSink& progress, const CancelToken& cancel) override;
  /// Removes this attempt's folder (storage::AttemptOutputPrefix of the job's attempt), nothing else.
  absl::Status Discard(const quark::v1::Job& job, const LeaseContext& lease,
                       const quark::v1::JobResult& result) override;

 private:
  /// The job's store and the model cache scope that goes with it.
  struct JobStorage {
    std::shared_ptr<storage::ObjectStore> store;
    std::string cache_scope;
    /// A file:// model's files, held open from the fetch to the end of the job.
    std::shared_ptr<storage::PinnedFolder> pinned_model;
  };
  /// The lease's store (its credentials', else the worker's), confined to the tenant's roots when it has any.
  absl::StatusOr<JobStorage> StorageFor(const quark::v1::Job& job, const LeaseContext& lease) const;
  absl::Status FetchInputs(const quark::v1::Job& job, JobStorage& storage, PipelineRequest& request,
                           ProgressSink& progress, const CancelToken& cancel);
  absl::StatusOr<quark::v1::JobResult> Publish(const quark::v1::Job& job, storage::ObjectStore& store,
                                               const PipelineRequest& request, const PipelineResult& pipeline,
                                               double seconds, ProgressSink& progress, const CancelToken& cancel);

  std::filesystem::path CheckpointDir(const std::string& job_id) const;
  /// The job's remote checkpoint, restored into request.checkpoint_dir and hooked to its layers; null when
  /// remote checkpoints are off or the model cannot be named portably (logged).
  std::unique_ptr<CheckpointMirror> MirrorFor(const quark::v1::Job& job, const JobStorage& storage,
                                              PipelineRequest& request, ProgressSink& progress) const;
  void RemoveCheckpoint(const std::string& job_id) const;
  void RemoveStaleCheckpoints() const;
  /// Whether a later attempt could get further (a crash, a lost upload) rather than fail the same way.
  static bool MayResume(const absl::Status& status);

  QuantizeJobRunnerOptions options_;
  std::shared_ptr<storage::ObjectStore> store_;
  std::shared_ptr<storage::ModelCache> cache_;
  std::shared_ptr<QuantizePipeline> pipeline_;
};

/// The manifest's "config": the pipeline's resolved config when it gave one, else the submitted spec's Config
/// (proto JSON) or {"preset": NAME}, with kv_cache_dtype and exclude when set.
nlohmann::json ManifestConfig(const quark::v1::JobSpec& spec, const PipelineResult& pipeline);

}  // namespace quark::worker
