// The scheduler of a quarkd replica on a shared store (PostgreSQL): the queue, leases, attempts and cancel flags
// live in the database, so any replica answers any worker's heartbeat, progress or completion, and a replica
// killed mid-job loses nothing but the parked Lease calls of its own workers. Leases are taken with FOR UPDATE
// SKIP LOCKED and expire on the database's clock; every replica's Tick requeues expired ones (SKIP LOCKED again,
// so exactly one replica handles each). In memory here: parked Lease calls, registered workers' slot counts,
// this replica's drain flags, and the leases handed out through it (for graceful drain).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/server_metrics.h"
#include "server/scheduler/clock.h"
#include "server/scheduler/event_relay.h"
#include "server/scheduler/scheduler.h"
#include "server/store/job_store.h"
#include "server/store/shared_job_queue.h"
#include "server/scheduler/worker_fit.h"

namespace quark::server {

/// Thread-safe. `store`, `queue`, `clock`, `relay` and `metrics` (may be null) must outlive the scheduler.
/// Tenant running limits hold across replicas: a claim counts the tenant's running jobs in the shared store.
class ReplicatedScheduler : public Scheduler {
 public:
  ReplicatedScheduler(JobStore* store, SharedJobQueue* queue, Clock* clock, EventRelay* relay, ServerMetrics* metrics,
                      SchedulerOptions options);
  ~ReplicatedScheduler() override;

  /// A job may have become QUEUED (a peer's NOTIFY): parked Lease calls try to claim it now.
  void Wake();

  absl::Status Recover() override;
  absl::StatusOr<quark::v1::Job> Submit(const std::string& request_id, const quark::v1::JobSpec& spec,
                                        const SubmitOptions& options = {}) override;
  absl::StatusOr<quark::v1::Job> Cancel(const std::string& job_id) override;
  quark::v1::internal::RegisterResponse Register(const quark::v1::internal::RegisterRequest& request) override;
  uint64_t Lease(const std::string& worker_id, absl::Duration wait, LeaseCallback done) override;
  void CancelLeaseWait(uint64_t wait_id) override;
  quark::v1::internal::HeartbeatResponse Heartbeat(const std::string& worker_id, const std::string& lease_id) override;
  absl::StatusOr<bool> ReportProgress(const quark::v1::internal::ReportProgressRequest& request) override;
  absl::Status Complete(const quark::v1::internal::CompleteRequest& request) override;
  void Tick() override;
  absl::Status AppendLog(const std::string& job_id, const std::string& text) override;
  void Shutdown() override;
  bool IsShutDown() const override;
  void StopLeasing() override;
  void SetWorkerKiller(WorkerKiller killer) override;
  void SetTenantRunningLimits(std::map<std::string, int64_t> max_running) override;
  bool SetDraining(const std::string& worker_id, bool draining) override;
  int QueueDepth() const override { return queue_depth_.load(); }
  int RunningJobs() const override { return running_.load(); }
  int LocalRunningJobs() const override;

 private:
  struct Waiter {
    std::string worker_id;
    absl::Time deadline;
    LeaseCallback done;
    bool claiming = false;  // the dispatcher is claiming a job for it outside the lock
    bool abandoned = false; // the caller went away meanwhile: the claimed job goes back to the queue
  };
  struct Worker {
    int slots = 1;
    WorkerCapacity capacity;  // GPU devices and memory announced at registration (worker_fit.h)
    absl::Time last_seen;
  };

  bool MayLeaseLocked(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int SlotsLocked(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Claims the next queued job for `worker_id` in the store; an empty response when none is free.
  quark::v1::internal::LeaseResponse Claim(const std::string& worker_id, int slots);
  /// Counts the jobs a claim passed over for memory (quarkd_lease_memory_skips_total) and logs each job once.
  void NoteMemoryPassOvers(const std::string& worker_id, const WorkerCapacity& capacity,
                           const std::vector<MemoryPassOver>& passed_over);
  /// Puts a claimed job whose Lease caller is gone back in the queue, its attempt withdrawn.
  void HandBack(const std::string& lease_id);
  void DispatchLoop();
  void DispatchOnce();
  void Expire();
  void AfterWrite(const LeaseRow& row, quark::v1::JobState from);
  void ForgetLease(const std::string& lease_id);
  /// Deduplication and deadlines (#17; as JobScheduler's, with followers and deadlines kept in the database).
  bool Deduplicate(quark::v1::Job* job, std::vector<quark::v1::JobEvent>* events, bool reuse_succeeded);
  void SweepFollowers();
  void SweepDeadlines();

  JobStore* const store_;
  SharedJobQueue* const queue_;
  Clock* const clock_;
  EventRelay* const relay_;
  ServerMetrics* const metrics_;
  const SchedulerOptions options_;

  mutable absl::Mutex mu_;
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_wait_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> draining_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> local_leases_ ABSL_GUARDED_BY(mu_);  // lease id -> job id
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool leasing_stopped_ ABSL_GUARDED_BY(mu_) = false;
  WorkerKiller killer_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> max_running_ ABSL_GUARDED_BY(mu_);  // tenant -> running jobs allowed
  static constexpr size_t kMaxMemoryNoted = 4096;
  std::set<std::string> memory_noted_ ABSL_GUARDED_BY(mu_);  // jobs logged as passed over for memory

  std::atomic<int> queue_depth_{0};
  std::atomic<int> running_{0};
  std::atomic<uint64_t> wakes_{0};
  int ticks_ = 0;  // Tick's thread only

  std::mutex dispatch_mu_;
  std::condition_variable dispatch_cv_;
  bool dispatch_requested_ = false;
  bool dispatch_stop_ = false;
  std::thread dispatcher_;
};

}  // namespace quark::server
