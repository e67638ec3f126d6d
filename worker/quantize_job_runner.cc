#include "worker/quantize_job_runner.h"

#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <system_error>

#include "core/base/log.h"
#include "quark/version.h"
#include "worker/job_folder.h"
#include "worker/manifest_inputs.h"
#include "worker/progress_util.h"
#include "worker/storage/object_uri.h"
#include "worker/storage/publish.h"
#include "worker/storage/strings.h"

namespace quark::worker {
namespace fs = std::filesystem;
namespace {

quark::v1::Progress Phase(const std::string& phase, double fraction, const std::string& message) {
  quark::v1::Progress p;
  p.set_phase(phase);
  p.set_fraction(fraction);
  p.set_message(message);
  return p;
}

nlohmann::json ProtoToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return nullptr;
  return nlohmann::json::parse(json, nullptr, false);
}

// A worker killed while it uploaded leaves part of its attempt's folder behind and no process to remove it. This
// attempt holds the job's lease, so no earlier attempt's result can be taken any more (quarkd takes a result only
// from the current lease, server/scheduler/result_check.h): their folders go before this one publishes. An earlier
// attempt still running without its lease removes what it writes afterwards itself (Run's failure path, Discard).
void RemoveEarlierAttempts(storage::ObjectStore& store, const quark::v1::Job& job) {
  for (int attempt = 1; attempt < job.attempts_size(); ++attempt) {
    const std::string prefix = storage::AttemptOutputPrefix(job.spec().output_uri(), job.id(), attempt);
    if (absl::Status removed = storage::RemovePublished(store, prefix); !removed.ok()) {
      log::Get("worker")->warn("job={} could not remove attempt {}'s folder {}: {}", job.id(), attempt, prefix,
                               std::string(removed.message()));
    }
  }
}

}  // namespace

nlohmann::json ManifestConfig(const quark::v1::JobSpec& spec, const PipelineResult& pipeline) {
  if (!pipeline.resolved_config.is_null()) return pipeline.resolved_config;
  nlohmann::json config = nlohmann::json::object();
  if (spec.has_config()) config = ProtoToJson(spec.config());
  if (spec.quantization_case() == quark::v1::JobSpec::kPreset) config = {{"preset", spec.preset()}};
  if (!spec.kv_cache_dtype().empty()) config["kv_cache_dtype"] = spec.kv_cache_dtype();
  if (spec.exclude_size() > 0) config["extra_exclude"] = std::vector<std::string>(spec.exclude().begin(), spec.exclude().end());
  return config;
}

QuantizeJobRunner::QuantizeJobRunner(QuantizeJobRunnerOptions options, std::shared_ptr<storage::ObjectStore> store,
                                     std::shared_ptr<storage::ModelCache> cache,
                                     std::shared_ptr<QuantizePipeline> pipeline)
    : options_(std::move(options)),
      store_(std::move(store)),
      cache_(std::move(cache)),
      pipeline_(std::move(pipeline)) {
  RemoveStaleCheckpoints();
  RemoveAbandonedJobFolders(options_.work_dir / "jobs");  // what a killed worker on this data dir left
}

absl::StatusOr<QuantizeJobRunner::JobStorage> QuantizeJobRunner::StorageFor(const quark::v1::Job& job,
                                                                            const LeaseContext& lease) const {
  const bool has_roots = lease.tenant_roots.model_roots_size() > 0 || lease.tenant_roots.output_prefixes_size() > 0;
  if (!HasStorageCredentials(lease.storage_credentials) && !has_roots) return JobStorage{store_, ""};
  if (!options_.lease_stores) {
    return absl::FailedPreconditionError(str::Cat(
        has_roots ? "tenant_roots" : "storage_credentials",
        ": the lease carries them but this worker cannot build a store for them (no lease store factory)"));
  }
  JobStorage storage{store_, ""};
  if (HasStorageCredentials(lease.storage_credentials)) {
    absl::StatusOr<std::shared_ptr<storage::ObjectStore>> store =
        options_.lease_stores->ForCredentials(lease.storage_credentials);
    if (!store.ok()) return store.status();
    storage = JobStorage{*std::move(store), options_.lease_stores->CacheScope(lease.storage_credentials)};
  }
  absl::StatusOr<std::shared_ptr<storage::ObjectStore>> confined =
      options_.lease_stores->ForTenant(storage.store, lease.tenant_roots, job.spec());
  if (!confined.ok()) return confined.status();
  storage.store = *std::move(confined);
  return storage;
}

absl::Status QuantizeJobRunner::FetchInputs(const quark::v1::Job& job, JobStorage& storage,
                                            PipelineRequest& request, ProgressSink& progress,
                                            const CancelToken& cancel) {
  const quark::v1::JobSpec& spec = job.spec();
  double fetch_end = options_.fetch_fraction;
  progress.Report(Phase("fetch", 0.0, str::Cat("fetching ", spec.model_uri())));
  absl::StatusOr<storage::LocalModel> model = cache_->FetchPinned(
      *storage.store, storage.cache_scope, spec.model_uri(), request.scratch_dir / "model",
      [&](int64_t done, int64_t total) {
        double f = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
        progress.Report(Phase("fetch", f * fetch_end * 0.9, str::Cat(done, "/", total, " bytes of the model")));
      },
      [&] { return cancel.IsCancelled(); });
  if (!model.ok()) return model.status();
  request.model_dir = model->dir;
  storage.pinned_model = model->pinned;
  struct Input {
    const std::string& uri;
    const char* field;
    fs::path* target;
  };
  for (const Input& input : {Input{spec.calibration().uri(), "calibration.uri", &request.calibration_file},
                             Input{spec.evaluation().uri(), "evaluation.uri", &request.evaluation_file},
                             Input{spec.gguf_imatrix_uri(), "gguf_imatrix_uri", &request.gguf_imatrix_file}}) {
    if (input.uri.empty()) continue;
    if (cancel.IsCancelled()) return absl::CancelledError(str::Cat("job ", job.id(), " cancelled while fetching"));
    absl::StatusOr<storage::ObjectUri> parsed = storage::ParseObjectUri(input.uri);
    if (!parsed.ok()) return absl::InvalidArgumentError(str::Cat("spec.", input.field, ": ", parsed.status().message()));
    fs::path local = request.scratch_dir / "inputs" / input.field / fs::path(parsed->key).filename();
    if (absl::Status status = storage.store->GetFile(input.uri, local); !status.ok()) {
      return absl::Status(status.code(), str::Cat("spec.", input.field, ": ", status.message()));
    }
    *input.target = local;
  }
  progress.Report(Phase("fetch", fetch_end, str::Cat("model at ", request.model_dir.string())));
  return absl::OkStatus();
}

absl::StatusOr<quark::v1::JobResult> QuantizeJobRunner::Run(const quark::v1::Job& job, const LeaseContext& lease,
                                                            ProgressSink& progress, const CancelToken& cancel) {
  auto started = std::chrono::steady_clock::now();
  if (job.spec().model_uri().empty()) return absl::InvalidArgumentError("spec.model_uri: empty");
  if (job.spec().output_uri().empty()) return absl::InvalidArgumentError("spec.output_uri: empty");
  if (job.id().empty() || job.id().find('/') != std::string::npos || job.id().find("..") != std::string::npos) {
    return absl::InvalidArgumentError(str::Cat("job.id: \"", job.id(), "\" is not a plain name"));
  }
  if (absl::StatusOr<storage::ObjectUri> out = storage::ParseObjectUri(job.spec().output_uri()); !out.ok()) {
    return absl::InvalidArgumentError(str::Cat("spec.output_uri: ", out.status().message()));
  }
  // The lease's store (and the keys inside it) is dropped when this job ends.
  absl::StatusOr<JobStorage> storage = StorageFor(job, lease);
  if (!storage.ok()) return storage.status();
  // Folders of jobs whose process died here (kill -9) are nobody's: clear them before taking disk for this one.
  RemoveAbandonedJobFolders(options_.work_dir / "jobs");
  JobFolder temp(options_.work_dir / "jobs" / job.id());
  PipelineRequest request;
  request.job_id = job.id();
  request.spec = job.spec();
  request.output_dir = temp.path() / "out";
  request.scratch_dir = temp.path() / "scratch";
  request.checkpoint_dir = CheckpointDir(job.id());
  request.tasks_dir = options_.tasks_dir;
  request.device = EngineDevice(job.spec(), options_.devices);
  if (!job.parent_id().empty()) request.float_baseline_store = storage->store;  // #36 item 1
  fs::create_directories(request.output_dir);
  fs::create_directories(request.scratch_dir);

  if (absl::Status status = FetchInputs(job, *storage, request, progress, cancel); !status.ok()) return status;
  if (cancel.IsCancelled()) return absl::CancelledError(str::Cat("job ", job.id(), " cancelled after fetching"));
  std::unique_ptr<CheckpointMirror> mirror = MirrorFor(job, *storage, request, progress);
  auto forget_checkpoints = [&] {
    RemoveCheckpoint(job.id());
    if (!mirror) return;
    if (absl::Status removed = mirror->Remove(); !removed.ok()) progress.Log(str::Cat("checkpoint: ", removed.message()));
  };

  ScaledProgressSink scaled(progress, options_.fetch_fraction, options_.pipeline_fraction, started);
  absl::StatusOr<PipelineResult> result = pipeline_->Run(request, scaled, cancel);
  if (!result.ok()) {
    // A retry can resume after a crash or a lost node; an error in the job itself would only fail again.
    if (!MayResume(result.status())) forget_checkpoints();
    return result.status();
  }
  if (cancel.IsCancelled()) return absl::CancelledError(str::Cat("job ", job.id(), " cancelled before upload"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  absl::StatusOr<quark::v1::JobResult> published = Publish(job, *storage->store, request, *result, seconds, progress, cancel);
  if (published.ok() || !MayResume(published.status())) forget_checkpoints();
  if (published.ok() && !result->gate_failure.empty()) {
    // Published and marked (manifest "gate"); the job fails with the figures kept in its result.
    progress.Metrics(result->metrics);
    return absl::FailedPreconditionError(str::Cat(result->gate_failure, " (artifacts kept, marked failed in ",
                                                  published->manifest_uri(), ")"));
  }
  return published;
}

absl::Status QuantizeJobRunner::Discard(const quark::v1::Job& job, const LeaseContext& lease,
                                        const quark::v1::JobResult& result) {
  const std::string prefix = storage::AttemptOutputPrefix(job.spec().output_uri(), job.id(), job.attempts_size());
  if (result.manifest_uri().rfind(prefix + "/", 0) != 0) {
    return absl::InvalidArgumentError(str::Cat("result.manifest_uri: \"", result.manifest_uri(),
                                               "\" is not in this attempt's folder ", prefix));
  }
  absl::StatusOr<JobStorage> storage = StorageFor(job, lease);
  if (!storage.ok()) return storage.status();
  return storage::RemovePublished(*storage->store, prefix);
}

fs::path QuantizeJobRunner::CheckpointDir(const std::string& job_id) const {
  return options_.work_dir / "checkpoints" / job_id;
}

std::unique_ptr<CheckpointMirror> QuantizeJobRunner::MirrorFor(const quark::v1::Job& job, const JobStorage& storage,
                                                               PipelineRequest& request, ProgressSink& progress) const {
  if (!options_.remote_checkpoints) return nullptr;
  absl::StatusOr<std::string> identity = ModelIdentity(*storage.store, job.spec().model_uri());
  if (!identity.ok()) {
    progress.Log(str::Cat("checkpoint: no remote checkpoints for this job: ", identity.status().message()));
    return nullptr;
  }
  auto mirror = std::make_unique<CheckpointMirror>(storage.store,
                                                   CheckpointPrefixUri(job.spec().output_uri(), job.id()),
                                                   request.checkpoint_dir, options_.remote_checkpoint,
                                                   [&progress](const std::string& line) { progress.Log(line); });
  if (absl::StatusOr<int64_t> restored = mirror->Restore(); !restored.ok()) {
    progress.Log(str::Cat("checkpoint: ", mirror->prefix_uri(), " not restored: ", restored.status().message()));
  }
  // Another engine version may compute other layers: its checkpoints are discarded, not resumed.
  request.checkpoint_identity = str::Cat(*identity, " engine ", QUARK_ENGINE_VERSION);
  CheckpointMirror* uploader = mirror.get();
  // A failed upload is logged by the mirror and retried after the next layer; the job goes on.
  request.on_layer_checkpointed = [uploader](int64_t finished) { (void)uploader->UploadThrough(finished); };
  return mirror;
}

void QuantizeJobRunner::RemoveCheckpoint(const std::string& job_id) const {
  std::error_code ec;
  fs::remove_all(CheckpointDir(job_id), ec);
}

bool QuantizeJobRunner::MayResume(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kAlreadyExists:
      return false;
    default:
      return true;
  }
}

void QuantizeJobRunner::RemoveStaleCheckpoints() const {
  // Checkpoints of jobs that ended elsewhere (their retry went to another worker) or never came back.
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(options_.work_dir / "checkpoints", ec)) {
    const auto modified = fs::last_write_time(entry.path(), ec);
    if (!ec && now - modified > options_.checkpoint_max_age) fs::remove_all(entry.path(), ec);
  }
}

absl::StatusOr<quark::v1::JobResult> QuantizeJobRunner::Publish(const quark::v1::Job& job,
                                                                storage::ObjectStore& store,
                                                                const PipelineRequest& request,
                                                                const PipelineResult& pipeline, double seconds,
                                                                ProgressSink& progress, const CancelToken& cancel) {
  storage::ManifestInfo manifest;
  manifest.job_id = job.id();
  manifest.config = ManifestConfig(job.spec(), pipeline);
  manifest.metrics = pipeline.metrics;
  manifest.metrics["seconds_total"] = seconds;
  manifest.extra = {{"model_uri", job.spec().model_uri()}, {"spec", ProtoToJson(job.spec())},
                    {"engine_version", QUARK_ENGINE_VERSION}, {"build", ManifestBuild()}};
  // Every input file by URI, size and SHA-256 (the model's files, calibration, evaluation, importance matrix).
  absl::StatusOr<nlohmann::json> inputs = ManifestInputs(job.spec(), request);
  if (!inputs.ok()) return inputs.status();
  manifest.extra["inputs"] = *std::move(inputs);
  // The digest quarkd took over the model files, resolved config, calibration and evaluation data and engine.
  if (!job.content_key().empty()) manifest.extra["content_key"] = job.content_key();
  // Who made it: the worker the job was leased to, its attempt, the devices that worker announced.
  manifest.extra["worker"] = {{"id", job.worker_id()}, {"attempt", job.attempts_size()}, {"devices", options_.devices}};
  manifest.signer = options_.signer.get();
  if (!pipeline.evaluation.is_null()) manifest.extra["evaluation"] = pipeline.evaluation;
  if (!pipeline.evaluation.is_null() || !pipeline.gate_failure.empty()) {
    manifest.extra["gate"] = {{"passed", pipeline.gate_failure.empty()}, {"failure", pipeline.gate_failure}};
  }
  // Fenced by the attempt: this attempt's own folder, which no other attempt writes (publish.h).
  std::string prefix = storage::AttemptOutputPrefix(job.spec().output_uri(), job.id(), job.attempts_size());
  RemoveEarlierAttempts(store, job);
  double lo = options_.pipeline_fraction;
  progress.Report(Phase("upload", lo, str::Cat("publishing to ", prefix)));
  absl::StatusOr<storage::PublishResult> published = storage::PublishArtifacts(
      store, request.output_dir, prefix, manifest,
      [&](int done, int total, int64_t bytes, int64_t bytes_total) {
        quark::v1::Progress p = Phase("upload", lo + (1.0 - lo) * 0.99 * bytes / std::max<int64_t>(bytes_total, 1),
                                      str::Cat(done, "/", total, " files uploaded"));
        p.set_layer(done);
        p.set_num_layers(total);
        progress.Report(p);
      },
      [&] { return cancel.IsCancelled(); });
  if (!published.ok()) {
    // A half-published attempt leaves nothing behind (a later attempt publishes into a folder of its own).
    if (absl::Status removed = storage::RemovePublished(store, prefix); !removed.ok()) {
      log::Get("worker")->warn("job={} could not remove the unfinished upload under {}: {}", job.id(), prefix,
                               std::string(removed.message()));
    }
    return published.status();
  }
  quark::v1::JobResult result;
  for (const storage::PublishedFile& file : published->files) {
    quark::v1::Artifact* artifact = result.add_artifacts();
    artifact->set_uri(file.uri);
    artifact->set_size_bytes(file.size_bytes);
    artifact->set_sha256(file.sha256);
  }
  result.set_manifest_uri(published->manifest_uri);
  result.set_manifest_sha256(published->manifest_sha256);
  for (const auto& [name, value] : manifest.metrics) (*result.mutable_metrics())[name] = value;
  progress.Report(Phase("upload", 1.0, str::Cat("published ", published->manifest_uri)));
  return result;
}

}  // namespace quark::worker
