// quark.v1.QuantizationService on the gRPC callback API. Handlers validate, call the scheduler or the store
// (short SQLite transactions), and finish; WatchJob is a streaming reactor (watch_job_reactor.h).
#pragma once

#include <map>
#include <mutex>

#include "quark/v1/service.grpc.pb.h"
#include "server/api/access_control.h"
#include "server/api/job_estimates.h"
#include "server/api/uri_policy.h"
#include "server/api/watch_job_reactor.h"
#include "server/api/worker_profiles.h"
#include "server/dedup/file_digest_cache.h"
#include "server/scheduler/event_hub.h"
#include "server/scheduler/job_scheduler.h"
#include "server/store/job_store.h"

namespace quark::server {

class QuantizationServiceImpl final : public quark::v1::QuantizationService::CallbackService {
 public:
  /// Every pointer must outlive the gRPC server.
  /// Roles: viewer for Get/List/Watch/ListPresets/ValidateConfig, submitter for Submit/Cancel (own tenant's
  /// jobs; admins any). Other tenants' jobs answer NOT_FOUND, as missing ones do.
  /// `workers` (may be null: no estimates per worker, no fit check) feeds ValidateConfig's estimates and
  /// SubmitJob's refusal of a job that fits no registered worker (job_estimates.h).
  /// A succeeded job's result is reused only after VerifyResult (result_verification.h; `trust_object_store`).
  /// `gpu_sources`: what can start a GPU worker besides the registered ones (a job asking for GPUs none can ever
  /// provide is refused FAILED_PRECONDITION; one that must wait gets an event saying for what).
  QuantizationServiceImpl(Scheduler* scheduler, JobStore* store, EventHub* hub, const UriPolicy* policy,
                          const AccessControl* access, const WorkerProfiles* workers = nullptr,
                          GpuSources gpu_sources = {}, bool trust_object_store = false)
      : scheduler_(scheduler), store_(store), hub_(hub), policy_(policy), access_(access), workers_(workers),
        gpu_sources_(std::move(gpu_sources)), trust_object_store_(trust_object_store) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context, const quark::v1::SubmitJobRequest* request,
                                      quark::v1::Job* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context, const quark::v1::GetJobRequest* request,
                                   quark::v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context, const quark::v1::ListJobsRequest* request,
                                     quark::v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context, const quark::v1::CancelJobRequest* request,
                                      quark::v1::Job* response) override;
  /// #29: a finished job of the caller's tenant (admins: any) and its events leave the store (JobStore::DeleteJob);
  /// audited as "delete".
  grpc::ServerUnaryReactor* DeleteJob(grpc::CallbackServerContext* context, const quark::v1::DeleteJobRequest* request,
                                      quark::v1::DeleteJobResponse* response) override;
  grpc::ServerWriteReactor<quark::v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                          const quark::v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* ListPresets(grpc::CallbackServerContext* context,
                                        const quark::v1::ListPresetsRequest* request,
                                        quark::v1::ListPresetsResponse* response) override;
  grpc::ServerUnaryReactor* ValidateConfig(grpc::CallbackServerContext* context,
                                           const quark::v1::ValidateConfigRequest* request,
                                           quark::v1::ValidateConfigResponse* response) override;

  /// Authorizes every open WatchJob stream again (after the tokens file was reloaded): a stream whose caller is
  /// no longer allowed (its token removed, its role lowered) ends with that refusal.
  void EndRevokedWatches();

 private:
  /// What SubmitJob checks and computes before it submits a spec: validation, the tenant's URIs, the memory
  /// estimate and the fit on the live workers, the content key and the verified-dedup decision.
  absl::StatusOr<SubmitOptions> PrepareSubmit(const Principal& principal, const quark::v1::SubmitJobRequest& request,
                                              const std::vector<WorkerProfile>& live);
  // #36 sweep jobs (quantization_service_sweep.cc).
  /// spec.sweep: plans one child per candidate (each through PrepareSubmit; a candidate the model cannot take is
  /// dropped with its reason in the table) and submits the parent with them; audited as one "submit".
  absl::StatusOr<quark::v1::Job> SubmitSweep(const grpc::CallbackServerContext& context, const Principal& principal,
                                             const quark::v1::SubmitJobRequest& request,
                                             const std::vector<WorkerProfile>& live);
  /// DeleteJob of a sweep's parent deletes its finished children first; returns the bytes they freed (0 for a job
  /// that is no parent). FAILED_PRECONDITION naming a child still active.
  absl::StatusOr<int64_t> DeleteSweepChildren(const quark::v1::Job& parent);

  Scheduler* const scheduler_;
  JobStore* const store_;
  EventHub* const hub_;
  const UriPolicy* const policy_;
  const AccessControl* const access_;
  const WorkerProfiles* const workers_;
  const GpuSources gpu_sources_;
  const bool trust_object_store_;  // verified dedup (#29): s3:// results reused on the worker's digests
  FileDigestCache digests_;
  // Open WatchJob streams and their calls. Recursive: a reactor's OnDone (which erases its entry) may run inline
  // in the Finish that EndRevokedWatches calls while holding the lock.
  std::recursive_mutex watches_mu_;
  std::map<WatchJobReactor*, grpc::CallbackServerContext*> watches_;  // model and data file digests for content keys, for the life of the process
};

/// DEADLINE_EXCEEDED when the call's deadline has already passed (no work is started for it).
absl::Status CheckDeadline(const grpc::CallbackServerContext* context);

/// The dry run of ValidateConfig, apart from gRPC: resolves the config and, for a file:// model, checks it
/// against the model's modules. Request errors (bad URI, path outside the roots) come back as the status;
/// Config errors come back in the response (valid = false, errors naming field paths). With request.estimate,
/// also the estimates on each kind of `workers` (job_estimates.h).
/// `read_roots`: the folders a file:// model is read within (ModelView); the policy's roots when empty.
absl::Status RunValidateConfig(const quark::v1::ValidateConfigRequest& request, const UriPolicy& policy,
                               quark::v1::ValidateConfigResponse* response,
                               const std::vector<WorkerProfile>& workers = {},
                               const std::vector<std::string>& read_roots = {});

}  // namespace quark::server
