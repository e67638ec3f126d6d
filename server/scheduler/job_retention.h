// The retention policy of finished jobs (#29): quarkd --retain-finished-jobs-days D deletes every SUCCEEDED, FAILED
// or CANCELLED job that finished more than D days ago, and --retain-finished-jobs N each tenant's finished jobs past
// its newest N, exactly as DeleteJob does (its row, events and attempts in
// one transaction, the tenant's storage quota freed by the store's triggers, an audit record), at start and then
// every sweep interval. Queued and running jobs are never touched: JobStore::DeleteJob checks the state inside the
// deleting transaction. A job's dedup entry is its own row's content key, so it goes with the row and a later
// identical submission runs afresh instead of pointing at a deleted job. Artifacts are not touched.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "quark/v1/service.pb.h"
#include "server/scheduler/clock.h"
#include "server/store/job_store.h"

namespace quark::server {

struct RetentionPolicy {
  /// Finished jobs whose finished_at lies more than this before now are deleted; InfiniteDuration = keep all.
  absl::Duration max_age = absl::InfiniteDuration();
  /// Each tenant keeps at most this many finished jobs, its newest; the older ones are deleted. 0 = no count limit.
  int max_finished_per_tenant = 0;
  /// Time between sweeps (by the injected clock); the first sweep runs at start.
  absl::Duration sweep_interval = absl::Hours(1);
  /// Deletions per sweep at most (the rest wait for the next sweep), so one sweep never holds the store long.
  int max_deletions_per_sweep = 10000;
  /// Candidate jobs read per store call.
  int page_size = 256;

  bool enabled() const { return max_age != absl::InfiniteDuration() || max_finished_per_tenant > 0; }
};

struct RetentionSweepResult {
  int64_t deleted = 0;
  int64_t freed_bytes = 0;
};

/// Told of every job a sweep deleted, with the bytes freed and why ("finished ..., more than ... ago" or "more than
/// N newer finished jobs"); quarkd appends the audit record.
using RetentionDeletedFn =
    std::function<void(const quark::v1::Job& job, int64_t freed_bytes, const std::string& reason)>;

/// Thread-compatible: one thread (quarkd's retention thread, or a test) calls MaybeSweep and Sweep.
class JobRetention {
 public:
  /// `store` and `clock` outlive this.
  JobRetention(JobStore* store, Clock* clock, RetentionPolicy policy, RetentionDeletedFn on_deleted);

  /// Sweeps when one is due by the clock (the first call always does); false when none was due or the policy is off.
  /// `stopping` (optional) is asked before each deletion: true ends the sweep there (quarkd shutting down).
  bool MaybeSweep(const std::function<bool()>& stopping = nullptr);

  /// Deletes the finished jobs older than the policy's age by the clock's now, then each tenant's finished jobs past
  /// its newest max_finished_per_tenant. A job another replica deleted first,
  /// or one no longer finished, is skipped; a store error ends the sweep and is returned (the next sweep retries).
  absl::StatusOr<RetentionSweepResult> Sweep(const std::function<bool()>& stopping = nullptr);

  /// When `job` finished: finished_at, or created_at for a finished job without one.
  static absl::Time FinishedAt(const quark::v1::Job& job);

 private:
  using ListFn = std::function<absl::StatusOr<std::vector<StoredJob>>(int64_t after_order)>;
  /// Deletes the listed jobs for which `expired` holds, paging by order; stops at the sweep's cap or `stopping`.
  absl::Status DeleteListed(const ListFn& list, const std::function<std::string(const quark::v1::Job&)>& expired,
                            const std::function<bool()>& stopping, RetentionSweepResult* result);

  JobStore* const store_;
  Clock* const clock_;
  const RetentionPolicy policy_;
  const RetentionDeletedFn on_deleted_;
  absl::Time next_sweep_ = absl::InfinitePast();
};

}  // namespace quark::server
