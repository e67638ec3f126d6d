// How a worker executes one leased job. The agent (worker_agent.h) owns the protocol; a JobRunner owns the work.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"
#include "quark/v1/worker.pb.h"
#include "worker/cancel_token.h"

namespace quark::worker {

/// Where a runner reports what it is doing. Implementations are thread-safe and never block for long (the
/// agent's coalesces events and sends them to quarkd).
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  /// phase (fetch, load, calibrate, quantize, export, evaluate, upload), layer i of num_layers, samples,
  /// fraction 0..1 of the whole job, ETA in seconds, and a free-form message.
  virtual void Report(const quark::v1::Progress& progress) = 0;
  /// One log line for the job's event log.
  virtual void Log(const std::string& line) = 0;
  /// Figures of a run that may still fail (a broken accuracy gate): the job's result keeps them even then.
  virtual void Metrics(const std::map<std::string, double>& /*metrics*/) {}
};

/// What a lease brings besides its job. Lives only as long as the job runs.
struct LeaseContext {
  /// The job's tenant's storage keys (LeaseResponse.storage_credentials): when any key is set the job reads and
  /// writes s3:// URIs with them instead of the worker's own. Secret: never logged, reported or stored.
  quark::v1::internal::StorageCredentials storage_credentials;
  /// The job's tenant's model_roots and output_prefixes (LeaseResponse.tenant_roots): the job's reads and writes
  /// are confined to them besides the worker's own roots (storage::TenantObjectStore). Empty: the worker's only.
  quark::v1::internal::TenantRoots tenant_roots;
};

class JobRunner {
 public:
  virtual ~JobRunner() = default;
  /// Runs `job` (its id and spec) under `lease` to the end. Returns the result (artifacts, manifest URI,
  /// metrics) on success; CANCELLED once `cancel` fired (checked between units of work, within seconds); any
  /// other error names the failing field, URI or file. Must not throw.
  virtual absl::StatusOr<quark::v1::JobResult> Run(const quark::v1::Job& job, const LeaseContext& lease,
                                                   ProgressSink& progress, const CancelToken& cancel) = 0;
  /// #33 item 2: removes the artifacts of a successful Run whose lease quarkd no longer holds (it was lost, or
  /// quarkd refused the completion): a stale attempt's files are never left visible. Only that attempt's own
  /// folder is touched. Runners that publish nothing keep this default.
  virtual absl::Status Discard(const quark::v1::Job& job, const LeaseContext& lease,
                               const quark::v1::JobResult& result) {
    (void)job;
    (void)lease;
    (void)result;
    return absl::OkStatus();
  }
  /// A lease without storage credentials: the worker's own storage.
  absl::StatusOr<quark::v1::JobResult> Run(const quark::v1::Job& job, ProgressSink& progress,
                                           const CancelToken& cancel) {
    return Run(job, LeaseContext{}, progress, cancel);
  }
};

}  // namespace quark::worker
