// What the gRPC services and QuarkServer need from a scheduler. JobScheduler keeps the queue and leases in
// memory over any JobStore (one quarkd); ReplicatedScheduler keeps them in a SharedJobQueue (PostgreSQL) so
// several quarkd replicas serve one set of jobs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "quark/v1/service.pb.h"
#include "quark/v1/worker.pb.h"

namespace quark::server {

class SweepManifestWriter;  // sweep_manifest.h

struct SchedulerOptions {
  absl::Duration heartbeat_interval = absl::Seconds(1);  // told to workers at Register
  absl::Duration lease_timeout = absl::Seconds(15);      // a lease without a heartbeat for this long is lost
  absl::Duration cancel_grace = absl::Seconds(5);        // a cancelled job's worker is killed after this
  int default_max_attempts = 3;                          // when JobSpec.max_attempts is 0
  /// #36: writes a sweep's (or an automatic search's) parent manifest as the parent ends, before its end is stored.
  /// Null: none is written (scheduler tests that do not look at it; quarkd always sets it).
  std::shared_ptr<const SweepManifestWriter> sweep_manifests;
};

/// Who submits a job and the limits that apply to it (security_config.h's TenantPolicy).
struct SubmitOptions {
  std::string tenant;           // stored in the job; "" with authentication off
  int64_t max_queued_jobs = 0;  // RESOURCE_EXHAUSTED when the tenant already has this many queued; 0 = no limit
  int64_t max_stored_bytes = 0;  // RESOURCE_EXHAUSTED past this many stored bytes (storage_quota.h); 0 = no limit
  /// content_key.h's key ("" = not keyed): stored with the job; unless spec.force, a job of the same tenant with
  /// this key that succeeded is returned (a new SUCCEEDED job with its result) and a queued or running one is
  /// followed (the new job ends as that one does; a follower is never leased).
  std::string content_key;
  /// #29 verified dedup: false when the tenant's succeeded job with this key could not be verified (its files
  /// changed, or they lie in an object store quarkd does not trust): then this job runs instead of reusing it.
  bool reuse_succeeded = true;
  /// Stored in the job (Job.needs_*_memory_bytes): a worker that announced less memory is not handed it
  /// (worker_fit.h). 0 = unknown: any worker.
  int64_t needs_host_memory_bytes = 0;
  int64_t needs_gpu_memory_bytes = 0;
};

/// #36: a sweep's children as quarkd's service planned them (server/api/sweep_plan.h): the parent's table with one
/// row per candidate (rows of candidates dropped at submit already FAILED with their reason) and, for every other
/// row, the child's spec and its own submit options (content key, memory needs; the tenant's limits as the parent's).
struct SweepChild {
  int row = 0;  // index into SweepPlan::table.candidates()
  quark::v1::JobSpec spec;
  SubmitOptions options;
};
struct SweepPlan {
  quark::v1::SweepResult table;
  std::vector<SweepChild> children;
  quark::v1::AutoSearchResult auto_search;  // #36 item 3: an automatic search's groups and sizes (auto_search_plan.h)
};

/// Thread-safe. Callbacks (lease answers, the worker killer) run without the scheduler's lock held.
/// See JobScheduler for the contract of each call.
class Scheduler {
 public:
  using LeaseCallback = std::function<void(quark::v1::internal::LeaseResponse)>;
  /// Asked to stop a worker process hard (a cancelled job that did not stop within the grace period).
  using WorkerKiller = std::function<void(const std::string& worker_id)>;

  virtual ~Scheduler() = default;

  virtual absl::Status Recover() = 0;
  virtual absl::StatusOr<quark::v1::Job> Submit(const std::string& request_id, const quark::v1::JobSpec& spec,
                                                const SubmitOptions& options = {}) = 0;
  virtual absl::StatusOr<quark::v1::Job> Cancel(const std::string& job_id) = 0;
  /// #36: persists a sweep's parent (RUNNING, never leased) and submits its children. Schedulers that cannot hold a
  /// parent answer UNIMPLEMENTED naming spec.sweep (spec.auto_search for an automatic search, #36 item 3).
  virtual absl::StatusOr<quark::v1::Job> SubmitSweep(const std::string& request_id, const quark::v1::JobSpec& spec,
                                                     const SubmitOptions& options, const SweepPlan& plan) {
    if (spec.has_auto_search()) {
      return absl::UnimplementedError("spec.auto_search: automatic searches are not supported by this scheduler "
                                      "(quarkd with --store postgres replicas)");
    }
    return absl::UnimplementedError("spec.sweep: sweeps are not supported by this scheduler (quarkd with --store "
                                    "postgres replicas); submit each candidate as its own job");
  }
  virtual quark::v1::internal::RegisterResponse Register(const quark::v1::internal::RegisterRequest& request) = 0;
  virtual uint64_t Lease(const std::string& worker_id, absl::Duration wait, LeaseCallback done) = 0;
  virtual void CancelLeaseWait(uint64_t wait_id) = 0;
  virtual quark::v1::internal::HeartbeatResponse Heartbeat(const std::string& worker_id,
                                                           const std::string& lease_id) = 0;
  virtual absl::StatusOr<bool> ReportProgress(const quark::v1::internal::ReportProgressRequest& request) = 0;
  virtual absl::Status Complete(const quark::v1::internal::CompleteRequest& request) = 0;
  virtual void Tick() = 0;
  /// Appends a log event to a queued or running job (the Slurm executor's pending reasons). FAILED_PRECONDITION
  /// once the job is final, NOT_FOUND for an unknown job.
  virtual absl::Status AppendLog(const std::string& job_id, const std::string& text) = 0;
  virtual void Shutdown() = 0;
  virtual bool IsShutDown() const = 0;
  /// Graceful drain (SIGTERM): no new leases from now on (parked Lease calls are answered empty at once);
  /// running jobs keep their leases, heartbeats and completions. Shutdown() still ends everything.
  virtual void StopLeasing() = 0;
  virtual void SetWorkerKiller(WorkerKiller killer) = 0;
  virtual void SetTenantRunningLimits(std::map<std::string, int64_t> max_running) = 0;
  virtual bool SetDraining(const std::string& worker_id, bool draining) = 0;
  virtual int QueueDepth() const = 0;
  virtual int RunningJobs() const = 0;
  /// Jobs leased through this process that are still running (graceful drain waits for them).
  virtual int LocalRunningJobs() const = 0;
};

}  // namespace quark::server
