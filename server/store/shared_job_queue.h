// The queue and leases kept in the store itself, so several quarkd replicas share them (PostgreSQL). Every call
// is one transaction on a locked job row; times are the database's clock, never a replica's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"
#include "server/scheduler/worker_fit.h"

namespace quark::server {

/// A job row with its lease columns. Times: milliseconds since the epoch on the database's clock.
struct LeaseRow {
  int64_t order = 0;
  quark::v1::Job job;
  std::string lease_id;  // "" unless RUNNING
  std::string lease_worker;
  int64_t lease_expires_ms = 0;
  bool cancel_requested = false;
  int64_t cancel_deadline_ms = 0;
};

/// Decides a locked row's new content inside the store's transaction: false leaves the row as it is; true
/// writes `row` (job, attempts, lease columns) and appends `events` (sequence numbers assigned by the store).
/// `now_ms` is the database clock read in that transaction. Must not block or call the store.
using RowUpdate = std::function<bool(int64_t now_ms, LeaseRow* row, std::vector<quark::v1::JobEvent>* events)>;

/// A queued job a claim passed over because the claiming worker lacks the memory it needs (worker_fit.h).
struct MemoryPassOver {
  std::string job_id;
  JobDemand demand;
};

/// Thread-safe. Errors as absl::Status; UNAVAILABLE while the database cannot be reached.
class SharedJobQueue {
 public:
  virtual ~SharedJobQueue() = default;

  /// Locks the first QUEUED job (higher priority, then creation order) that no other transaction holds
  /// (FOR UPDATE SKIP LOCKED, so two replicas never take the same row) and applies `update`. nullopt when no
  /// job is free or `worker_id` already holds `max_held` running jobs. Jobs of a tenant in `tenant_limits` that
  /// already runs that many (across every replica) are passed over; such claims are serialized between replicas
  /// so that two of them never both take a tenant's last free place. Jobs that `worker` does not fit
  /// (WorkerFitsJob: more GPUs or memory than it announced) are passed over too: they wait for a worker that has
  /// them. When `passed_over` is set it receives, in queue order, up to kMaxPassOvers jobs that `worker` would have
  /// taken before the claimed one (before none: any) but for memory.
  virtual absl::StatusOr<std::optional<LeaseRow>> ClaimNext(const std::string& worker_id, int max_held,
                                                            const RowUpdate& update,
                                                            const std::map<std::string, int64_t>& tenant_limits = {},
                                                            const WorkerCapacity& worker = {},
                                                            std::vector<MemoryPassOver>* passed_over = nullptr) = 0;
  static constexpr int kMaxPassOvers = 16;
  /// Locks job `job_id` (waiting for other holders) and applies `update`. NOT_FOUND naming the id.
  virtual absl::StatusOr<LeaseRow> UpdateJobRow(const std::string& job_id, const RowUpdate& update) = 0;
  /// Locks the RUNNING job holding `lease_id`; NOT_FOUND when none does (lost, completed or unknown).
  virtual absl::StatusOr<LeaseRow> UpdateLeasedRow(const std::string& lease_id, const RowUpdate& update) = 0;
  /// Extends a held lease to now + ttl (database clock). Returns the job's cancel flag; NOT_FOUND when the lease
  /// is not held.
  virtual absl::StatusOr<bool> RenewLease(const std::string& lease_id, int64_t ttl_ms) = 0;

  enum class Stale { kLeaseExpired, kCancelOverdue, kHeldByWorker, kDeadlinePassed };
  /// Applies `update` to RUNNING rows whose lease expired, whose cancel grace ran out, or that `worker_id`
  /// holds, or to QUEUED and RUNNING rows past their deadline (JobSpec.deadline_seconds after submission, on the
  /// database clock) whose stop was not asked for yet, skipping rows another transaction has locked (a peer
  /// replica is handling them). Returns the rows after their update (only those `update` changed), at most
  /// `limit`.
  virtual absl::StatusOr<std::vector<LeaseRow>> UpdateStaleRows(Stale which, const std::string& worker_id, int limit,
                                                                const RowUpdate& update) = 0;
  /// Jobs in `state`, of `tenant` when not empty; followers (deduplicated jobs, which hold no worker) not counted.
  virtual absl::StatusOr<int64_t> CountInState(quark::v1::JobState state, const std::string& tenant) = 0;

  /// Decides a follower's row (a deduplicated job that is QUEUED or RUNNING, Job.deduplicated_from set) from its
  /// leader's job; as RowUpdate otherwise.
  using FollowerUpdate = std::function<bool(int64_t now_ms, const quark::v1::Job& leader, LeaseRow* row,
                                            std::vector<quark::v1::JobEvent>* events)>;
  /// Applies `update` to followers whose state differs from their leader's (SKIP LOCKED), at most `limit`;
  /// returns the rows it changed.
  virtual absl::StatusOr<std::vector<LeaseRow>> UpdateFollowers(int limit, const FollowerUpdate& update) = 0;
};

}  // namespace quark::server
