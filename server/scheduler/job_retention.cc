#include "server/scheduler/job_retention.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/time_util.h"

namespace quark::server {
JobRetention::JobRetention(JobStore* store, Clock* clock, RetentionPolicy policy, RetentionDeletedFn on_deleted)
    : store_(store), clock_(clock), policy_(policy), on_deleted_(std::move(on_deleted)) {}

absl::Time JobRetention::FinishedAt(const quark::v1::Job& job) {
  return FromTimestamp(job.has_finished_at() ? job.finished_at() : job.created_at());
}

bool JobRetention::MaybeSweep(const std::function<bool()>& stopping) {
  if (!policy_.enabled()) return false;
  const absl::Time now = clock_->Now();
  if (now < next_sweep_) return false;
  next_sweep_ = now + policy_.sweep_interval;
  absl::StatusOr<RetentionSweepResult> swept = Sweep(stopping);
  if (!swept.ok()) {
    log::Get("retention")->warn("job=- retention sweep stopped: {}", ForLog(swept.status().ToString()));
  } else if (swept->deleted > 0) {
    log::Get("retention")->info("job=- retention deleted {} finished jobs ({} bytes)", swept->deleted,
                                swept->freed_bytes);
  }
  return true;
}

absl::StatusOr<RetentionSweepResult> JobRetention::Sweep(const std::function<bool()>& stopping) {
  RetentionSweepResult result;
  if (policy_.max_age != absl::InfiniteDuration()) {
    const absl::Time cutoff = clock_->Now() - policy_.max_age;
    const std::string age = absl::FormatDuration(policy_.max_age);
    absl::Status status = DeleteListed(
        [&](int64_t after) { return store_->ListFinishedJobs(cutoff, after, policy_.page_size); },
        [&](const quark::v1::Job& job) -> std::string {
          // Created before the cutoff but finished after it (a long queue or run): kept until a later sweep.
          if (FinishedAt(job) >= cutoff) return "";
          return absl::StrCat("finished ", absl::FormatTime(FinishedAt(job), absl::UTCTimeZone()), ", more than ",
                              age, " ago");
        },
        stopping, &result);
    if (!status.ok()) return status;
  }
  if (policy_.max_finished_per_tenant > 0) {
    const int keep = policy_.max_finished_per_tenant;
    absl::Status status = DeleteListed(
        [&](int64_t after) { return store_->ListExcessFinishedJobs(keep, after, policy_.page_size); },
        [&](const quark::v1::Job&) { return absl::StrCat("more than ", keep, " newer finished jobs"); }, stopping,
        &result);
    if (!status.ok()) return status;
  }
  return result;
}

absl::Status JobRetention::DeleteListed(const ListFn& list,
                                        const std::function<std::string(const quark::v1::Job&)>& expired,
                                        const std::function<bool()>& stopping, RetentionSweepResult* result) {
  int64_t after = 0;
  while (result->deleted < policy_.max_deletions_per_sweep) {
    absl::StatusOr<std::vector<StoredJob>> page = list(after);
    if (!page.ok()) return page.status();
    for (const StoredJob& stored : *page) {
      after = stored.order;
      if (result->deleted >= policy_.max_deletions_per_sweep) break;
      const std::string reason = expired(stored.job);
      if (reason.empty()) continue;
      if (stopping && stopping()) return absl::OkStatus();
      absl::StatusOr<int64_t> freed = store_->DeleteJob(stored.job.id());
      if (absl::IsNotFound(freed.status()) || absl::IsFailedPrecondition(freed.status())) continue;
      if (!freed.ok()) return freed.status();
      ++result->deleted;
      result->freed_bytes += *freed;
      if (on_deleted_) on_deleted_(stored.job, *freed, reason);
    }
    if (static_cast<int>(page->size()) < policy_.page_size) break;
  }
  return absl::OkStatus();
}

}  // namespace quark::server
