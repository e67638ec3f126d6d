// Jobs from submission to a final state: a priority-then-FIFO queue, leases to worker slots kept alive by
// heartbeats, requeue on lease loss up to max_attempts, and cancellation. Every state change is written to
// the JobStore (with its event) before anyone is told about it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "quark/v1/worker.pb.h"
#include "server/metrics/server_metrics.h"
#include "server/scheduler/clock.h"
#include "server/scheduler/event_hub.h"
#include "server/scheduler/auto_search_plan.h"
#include "server/scheduler/scheduler.h"
#include "server/scheduler/sweep_table.h"
#include "server/scheduler/worker_fit.h"
#include "server/store/job_store.h"

namespace quark::server {

/// Thread-safe. Callbacks (lease answers, the worker killer) run without the scheduler's lock held.
class JobScheduler : public Scheduler {
 public:

  /// `store`, `clock`, `hub` and `metrics` (may be null) must outlive the scheduler.
  JobScheduler(JobStore* store, Clock* clock, EventHub* hub, ServerMetrics* metrics, SchedulerOptions options);
  ~JobScheduler() override;

  /// Rebuilds the queue from the store after a start (clean or not): queued jobs stay queued in their
  /// order; running jobs lost their lease with the old process and are requeued (or FAILED past max attempts).
  absl::Status Recover() override;

  /// Persists and queues a validated spec. A repeated non-empty request_id returns the job it first created.
  /// RESOURCE_EXHAUSTED naming the quota when options.max_queued_jobs is reached.
  absl::StatusOr<quark::v1::Job> Submit(const std::string& request_id, const quark::v1::JobSpec& spec,
                                        const SubmitOptions& options = {}) override;
  /// Queued: CANCELLED now. Running: the worker is told at its next heartbeat and the job ends CANCELLED when
  /// it completes or after the grace period (its worker then killed). Final states: returned unchanged.
  absl::StatusOr<quark::v1::Job> Cancel(const std::string& job_id) override;
  /// #36 (job_scheduler_sweep.cc): the parent is stored RUNNING and never queued; each child is submitted as
  /// Submit would (deduplicated by its content key, counted in the tenant's quotas) with Job.parent_id set. The
  /// whole sweep is refused RESOURCE_EXHAUSTED when its children would take the tenant past max_queued_jobs. A
  /// repeated request_id returns the parent it first created. The parent ends when its last child ends (its
  /// table filled from each child as it ends); cancelling it cancels every child still active.
  absl::StatusOr<quark::v1::Job> SubmitSweep(const std::string& request_id, const quark::v1::JobSpec& spec,
                                             const SubmitOptions& options, const SweepPlan& plan) override;

  // The worker protocol (worker.proto).
  quark::v1::internal::RegisterResponse Register(const quark::v1::internal::RegisterRequest& request) override;
  /// Answers `done` now when a job is ready for this worker, else parks the call until a job arrives or
  /// `wait` passes (answered empty). Returns a wait id for CancelLeaseWait (0 when answered already).
  uint64_t Lease(const std::string& worker_id, absl::Duration wait, LeaseCallback done) override;
  /// The caller went away: answers its parked Lease empty (if still parked).
  void CancelLeaseWait(uint64_t wait_id) override;
  quark::v1::internal::HeartbeatResponse Heartbeat(const std::string& worker_id, const std::string& lease_id) override;
  /// Returns whether the job was cancelled; NOT_FOUND for an unknown lease.
  absl::StatusOr<bool> ReportProgress(const quark::v1::internal::ReportProgressRequest& request) override;
  /// NOT_FOUND for an unknown (e.g. lost) lease.
  absl::Status Complete(const quark::v1::internal::CompleteRequest& request) override;

  /// Expires leases and cancel grace periods, and answers Lease calls whose wait ran out. The server calls it
  /// every ~100 ms; tests call it after moving a ManualClock.
  void Tick() override;
  absl::Status AppendLog(const std::string& job_id, const std::string& text) override;
  /// Answers every parked Lease and refuses new waits (server shutdown).
  void Shutdown() override;

  /// True once Shutdown() ran: the worker service then refuses Lease with UNAVAILABLE, so workers back off.
  bool IsShutDown() const override;

  void SetWorkerKiller(WorkerKiller killer) override;
  /// Jobs of a tenant listed here run at most this many at once (the rest wait queued). Replaces the old map.
  void SetTenantRunningLimits(std::map<std::string, int64_t> max_running) override;
  /// A draining worker keeps its leases but gets no new ones. Returns whether the worker is registered now.
  bool SetDraining(const std::string& worker_id, bool draining) override;
  int QueueDepth() const override;
  int RunningJobs() const override;
  void StopLeasing() override;
  int LocalRunningJobs() const override { return RunningJobs(); }

 private:
  struct LeaseState {
    std::string job_id;
    std::string worker_id;
    int attempt = 0;
    absl::Time deadline;
    std::string phase;
    absl::Time phase_started;
  };
  struct ActiveJob {
    int64_t order = 0;
    quark::v1::Job job;
    std::string lease_id;            // empty while queued
    bool cancel_requested = false;
    absl::Time cancel_deadline;
    bool deadline_passed = false;    // its stop was asked for by spec.deadline_seconds, not CancelJob
    bool memory_wait_noted = false;  // logged as passed over for memory (once per job)
  };
  struct Worker {
    int slots = 1;
    WorkerCapacity capacity;  // GPU devices and memory announced at registration (worker_fit.h)
    std::set<std::string> leases;
    absl::Time last_seen;
  };
  struct TenantCounts {
    int64_t queued = 0;
    int64_t running = 0;
  };
  struct Waiter {
    std::string worker_id;
    absl::Time deadline;
    LeaseCallback done;
  };
  // Queue key: higher priority first, then creation order.
  using QueueKey = std::tuple<int, int64_t, std::string>;
  using Answers = std::vector<std::function<void()>>;

  absl::StatusOr<quark::v1::Job> SubmitLocked(const std::string& request_id, const quark::v1::JobSpec& spec,
                                              const SubmitOptions& options, const std::string& parent_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<quark::v1::Job> CancelLocked(const std::string& job_id, Answers* answers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sweeps (#36, job_scheduler_sweep.cc).
  absl::StatusOr<quark::v1::Job> CancelSweepLocked(const std::string& parent_id, Answers* answers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Fills the ended child's row of its parent's table; ends the parent when it was the last one.
  void SweepChildEndedLocked(const quark::v1::Job& child) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Recover(): active parents' rows catch up with children that ended (or were never created) while quarkd was down.
  void ResyncSweepsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The stored (or still active) children the rows of `parent`'s table name: what its manifest is built from.
  std::vector<quark::v1::Job> SweepChildrenLocked(const quark::v1::Job& parent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// FinishLocked of a parent with a manifest writer: the parent (its final state, error, result and finished_at
  /// set) moves from active_ to ending_parents_ with a snapshot of its children; its end is stored by
  /// WriteEndingManifests once the manifest is written.
  void BeginParentEndLocked(std::map<std::string, ActiveJob>::iterator it, quark::v1::JobState from, bool has_result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Writes the manifest of every parent in ending_parents_ (sweep_manifest.h) without the lock, then stores each
  /// parent's end after the event saying where its manifest is and its SHA-256, or why it was not written. Every
  /// public call that can end a job runs it after letting go of the lock, so the caller that ended a parent sees
  /// it ended when the call returns, and a store that blocks (an s3 endpoint that is down, retried) stalls only
  /// that caller. A quarkd stopped between the write and the stored end ends the parent again at Recover, and the
  /// writer writes the same bytes (sweep_manifest.h).
  void WriteEndingManifests() ABSL_LOCKS_EXCLUDED(mu_);
  /// Ends `parent_id` when every row is final (SweepOutcome); else saves the table. Returns whether it ended.
  bool MaybeFinishSweepLocked(const std::string& parent_id, const std::string& note) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Automatic searches (#36 item 3, job_scheduler_auto.cc): a sweep parent whose rows are sensitivity passes, then
  // verification rounds.
  /// Every row final: searches after the passes, measures after a round; submits the next round or ends the parent.
  /// Returns whether the parent ended.
  bool AdvanceAutoSearchLocked(const std::string& parent_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The recipe of the parent's next round (the search after its passes, the refinement after a missed round), or
  /// nullopt when the parent ended here (met, rounds spent, nothing left to search or refine).
  std::optional<AutoRecipe> NextAutoRecipeLocked(const std::string& parent_id,
                                                 const std::vector<quark::v1::Job>& passes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Submits `recipe`'s verification child as the parent's next row (for a worker with needs_host_bytes). Returns
  /// whether that child is final already (deduplicated); false too when it could not be created (the parent then
  /// ended FAILED).
  bool SubmitAutoRoundLocked(const std::string& parent_id, AutoRecipe recipe, int64_t needs_host_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The pass children of an automatic search, one per candidate row (FAILED stand-ins for dropped ones).
  std::vector<quark::v1::Job> AutoPassesLocked(const quark::v1::Job& parent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  QueueKey KeyOf(const ActiveJob& active) const { return {-active.job.spec().priority(), active.order, active.job.id()}; }
  absl::Status SaveLocked(quark::v1::Job& job, std::vector<quark::v1::JobEvent> events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  quark::v1::JobEvent StateEventLocked(const quark::v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FinishLocked(const std::string& job_id, quark::v1::JobState state, const std::string& error,
                            const quark::v1::JobResult* result) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The second half of FinishLocked: stores the ended job (after `events`), counts it, leaves active_, and tells its
  /// followers and its parent.
  absl::Status StoreEndLocked(std::map<std::string, ActiveJob>::iterator it, quark::v1::JobState from,
                              const quark::v1::JobResult* result, std::vector<quark::v1::JobEvent> events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LoseLeaseLocked(const std::string& lease_id, const std::string& reason, const std::string& metric_reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequeueOrFailLocked(ActiveJob& active, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLeaseLocked(std::string lease_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // by value: it clears the caller's copy
  void DispatchLocked(Answers* answers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AssignLocked(const std::string& worker_id, quark::v1::internal::LeaseResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasFreeSlotLocked(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountStateLocked(const quark::v1::Job& job, quark::v1::JobState from) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountTenantLocked(const std::string& tenant, quark::v1::JobState state, int delta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The first queued job `worker` may run: its tenant below its running limit, its resources within the worker's
  /// (queue_.end() when none).
  std::set<QueueKey>::iterator NextRunnableLocked(const std::string& worker_id, const Worker& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Counts a job passed over for memory (quarkd_lease_memory_skips_total) and logs it, once per job.
  void NoteMemorySkipLocked(ActiveJob& active, const JobDemand& demand, const std::string& worker_id,
                            const Worker& worker, Shortfall shortfall) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ObservePhaseLocked(LeaseState& lease, const std::string& phase) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateGaugesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked(absl::Time now, Answers* answers, std::vector<std::string>* to_kill)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerWaiterLocked(uint64_t wait_id, quark::v1::internal::LeaseResponse response, Answers* answers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deduplication and deadlines (job_scheduler_dedup.cc).
  /// Fills a new job from the tenant's job with the same content key: SUCCEEDED with its result, or a follower
  /// of the job that runs. Returns false (job untouched) when there is none to reuse, or when the match succeeded
  /// and `reuse_succeeded` is false (SubmitOptions: its result could not be verified).
  bool DeduplicateLocked(quark::v1::Job* job, std::vector<quark::v1::JobEvent>* events, bool reuse_succeeded)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Followers take `leader`'s state: queued/running in step, its final state, error and result at the end.
  void FollowLeaderLocked(const quark::v1::Job& leader) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Recover(): followers whose leader changed (or ended) while quarkd was down catch up.
  void ResyncFollowersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Jobs past spec.deadline_seconds: queued ones (and followers) fail now; running ones are stopped as if
  /// cancelled and fail with the deadline error when their worker stops (or is killed).
  void ExpireDeadlinesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// How a job whose stop was asked for ends: CANCELLED "cancelled", or FAILED with the deadline error.
  std::pair<quark::v1::JobState, std::string> StopOutcome(const ActiveJob& active, const std::string& detail) const;

  JobStore* const store_;
  Clock* const clock_;
  EventHub* const hub_;
  ServerMetrics* const metrics_;
  const SchedulerOptions options_;

  mutable absl::Mutex mu_;
  std::map<std::string, ActiveJob> active_ ABSL_GUARDED_BY(mu_);  // queued and running jobs
  std::set<QueueKey> queue_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, LeaseState> leases_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);  // in arrival order
  uint64_t next_wait_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool leasing_stopped_ ABSL_GUARDED_BY(mu_) = false;
  WorkerKiller killer_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, TenantCounts> tenants_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> max_running_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> draining_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> followers_ ABSL_GUARDED_BY(mu_);  // leader id -> follower ids
  // #36: sweep parents that ended, their manifests not yet written (BeginParentEndLocked, WriteEndingManifests).
  struct EndingParent {
    ActiveJob active;
    quark::v1::JobState from = quark::v1::JobState::JOB_STATE_UNSPECIFIED;
    std::vector<quark::v1::Job> children;
    bool has_result = false;
    bool writing = false;  // a caller is writing its manifest now
  };
  std::map<std::string, EndingParent> ending_parents_ ABSL_GUARDED_BY(mu_);
};

/// The error of a job stopped by its deadline: "DEADLINE_EXCEEDED: deadline of N s passed".
std::string DeadlineError(const quark::v1::Job& job);

/// Turns a new `job` into a deduplicated one from `origin`, the tenant's job with the same content key: a
/// SUCCEEDED origin's result is copied (the job is created SUCCEEDED), a queued or running one is followed (the
/// job takes its state). deduplicated_from names the job that ran. Returns the log event saying so.
quark::v1::JobEvent DeduplicateFrom(const quark::v1::Job& origin, absl::Time now, quark::v1::Job* job);

/// The tenant's job with `job`'s content key (the newest succeeded one first, as the store orders them), or nullopt
/// when there is none. A store error is logged and means "not deduplicated": the job then runs. A succeeded match
/// counts only with `reuse_succeeded` (#29: else the job runs instead of receiving an unverified result).
std::optional<quark::v1::Job> FindContentKeyMatch(JobStore& store, const quark::v1::Job& job, bool reuse_succeeded);

/// Random identifiers: `prefix` + 32 hex digits (128 bits from OpenSSL RAND_bytes). Aborts without entropy.
std::string NewId(const std::string& prefix);

/// True for SUCCEEDED, FAILED and CANCELLED.
bool IsFinal(quark::v1::JobState state);

}  // namespace quark::server
