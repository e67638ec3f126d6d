// The #29 retention contract (server/scheduler/job_retention.h) against a JobStore, run on SQLite and on a real
// PostgreSQL (job_retention_test.cc): a sweep deletes exactly the finished jobs that finished more than the policy's
// age before the injected clock's now, as DeleteJob does (the tenant's stored bytes fall by what it freed, the dedup
// entry goes with the row), never a queued or running job however old, and pages through the candidates.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "server/scheduler/clock.h"
#include "server/scheduler/job_retention.h"
#include "server/scheduler/time_util.h"
#include "server/store/job_store.h"

namespace quark::server::testing {

/// Stores a job of `tenant` in `state`, created `created_ago` and (when finished) finished `finished_ago` before
/// `now`, with a state event carrying it, as the schedulers write them.
inline void StoreAgedJob(JobStore& store, absl::Time now, const std::string& id, const std::string& tenant,
                         quark::v1::JobState state, absl::Duration created_ago, absl::Duration finished_ago,
                         const std::string& content_key = "") {
  quark::v1::Job job;
  job.set_id(id);
  job.set_tenant(tenant);
  job.set_state(state);
  job.set_content_key(content_key);
  job.mutable_spec()->set_model_uri("file:///models/" + tenant);
  job.mutable_spec()->set_preset("w_int8_a_int8_per_tensor_sym");
  *job.mutable_created_at() = ToTimestamp(now - created_ago);
  if (state != quark::v1::JOB_STATE_QUEUED && state != quark::v1::JOB_STATE_RUNNING) {
    *job.mutable_finished_at() = ToTimestamp(now - finished_ago);
  }
  std::vector<quark::v1::JobEvent> events(1);
  events[0].set_state(state);
  *events[0].mutable_job() = job;
  bool created = false;
  ASSERT_TRUE(store.CreateJob(job, &events, &created).ok()) << id;
}

inline std::vector<std::string> SortedIds(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

inline void ExpectRetentionDeletesOnlyOldFinishedJobs(JobStore& store) {
  using quark::v1::JobState;
  ManualClock clock(absl::FromUnixSeconds(1800000000));
  const absl::Time now = clock.Now();
  const absl::Duration day = absl::Hours(24);
  StoreAgedJob(store, now, "old-succeeded", "a", JobState::JOB_STATE_SUCCEEDED, 10 * day, 9 * day, "key-old");
  StoreAgedJob(store, now, "old-cancelled", "b", JobState::JOB_STATE_CANCELLED, 8 * day, 8 * day);
  StoreAgedJob(store, now, "long-run-failed", "a", JobState::JOB_STATE_FAILED, 10 * day, 3 * day);
  StoreAgedJob(store, now, "ancient-queued", "a", JobState::JOB_STATE_QUEUED, 30 * day, 0 * day);
  StoreAgedJob(store, now, "ancient-running", "b", JobState::JOB_STATE_RUNNING, 30 * day, 0 * day);
  StoreAgedJob(store, now, "recent-succeeded", "b", JobState::JOB_STATE_SUCCEEDED, 2 * day, 1 * day, "key-new");
  StoreAgedJob(store, now, "just-inside", "a", JobState::JOB_STATE_SUCCEEDED, 8 * day, 7 * day - absl::Seconds(1));
  ASSERT_TRUE(store.FindByContentKey("a", "key-old").ok());

  std::vector<std::string> deleted;
  std::map<std::string, int64_t> freed_by_tenant;
  RetentionPolicy policy;
  policy.max_age = 7 * day;
  policy.page_size = 2;  // seven candidates over several pages
  JobRetention retention(&store, &clock, policy, [&](const quark::v1::Job& job, int64_t freed, const std::string&) {
    deleted.push_back(job.id());
    freed_by_tenant[job.tenant()] += freed;
  });
  const int64_t a_before = *store.TenantStoredBytes("a");
  const int64_t b_before = *store.TenantStoredBytes("b");
  absl::StatusOr<RetentionSweepResult> swept = retention.Sweep();
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(SortedIds(deleted), (std::vector<std::string>{"old-cancelled", "old-succeeded"}));
  EXPECT_EQ(swept->deleted, 2);
  EXPECT_EQ(swept->freed_bytes, freed_by_tenant["a"] + freed_by_tenant["b"]);
  // Freed exactly as DeleteJob frees: the quota counter falls by the bytes reported.
  EXPECT_GT(freed_by_tenant["a"], 0);
  EXPECT_EQ(*store.TenantStoredBytes("a"), a_before - freed_by_tenant["a"]);
  EXPECT_EQ(*store.TenantStoredBytes("b"), b_before - freed_by_tenant["b"]);
  EXPECT_EQ(store.GetJob("old-succeeded").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<quark::v1::JobEvent>> events = store.ListEvents("old-succeeded", 0, 10);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  // The dedup entry went with the row: an identical submission now runs instead of pointing at a deleted job.
  EXPECT_EQ(store.FindByContentKey("a", "key-old").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store.FindByContentKey("b", "key-new").ok());
  for (const char* kept : {"long-run-failed", "ancient-queued", "ancient-running", "recent-succeeded", "just-inside"}) {
    EXPECT_TRUE(store.GetJob(kept).ok()) << kept;
  }

  // Five days on, the long run's job (finished 3 days before) and the one just inside are 8 days old; the queued and
  // running ones, a month old, stay. At most one deletion a sweep: the second waits for the next sweep.
  clock.Advance(5 * day);
  deleted.clear();
  policy.max_deletions_per_sweep = 1;
  auto record = [&](const quark::v1::Job& job, int64_t, const std::string&) { deleted.push_back(job.id()); };
  JobRetention limited(&store, &clock, policy, record);
  ASSERT_TRUE(limited.Sweep().ok());
  EXPECT_EQ(deleted.size(), 1u);
  ASSERT_TRUE(limited.Sweep().ok());
  EXPECT_EQ(SortedIds(deleted), (std::vector<std::string>{"just-inside", "long-run-failed"}));
  ASSERT_TRUE(limited.Sweep().ok());
  EXPECT_EQ(deleted.size(), 2u);
  for (const char* kept : {"ancient-queued", "ancient-running", "recent-succeeded"}) {
    EXPECT_TRUE(store.GetJob(kept).ok()) << kept;
  }
}

/// MaybeSweep sweeps at its first call (quarkd's start) and then once per sweep interval of the injected clock.
inline void ExpectSweepsAtStartAndEveryInterval(JobStore& store) {
  ManualClock clock(absl::FromUnixSeconds(1800000000));
  RetentionPolicy policy;
  policy.max_age = absl::Hours(24);
  policy.sweep_interval = absl::Hours(6);
  std::vector<std::string> deleted;
  auto record = [&](const quark::v1::Job& job, int64_t, const std::string&) { deleted.push_back(job.id()); };
  JobRetention retention(&store, &clock, policy, record);
  StoreAgedJob(store, clock.Now(), "stale", "a", quark::v1::JOB_STATE_FAILED, absl::Hours(50), absl::Hours(49));
  StoreAgedJob(store, clock.Now(), "fresh", "a", quark::v1::JOB_STATE_FAILED, absl::Hours(21), absl::Hours(20));
  EXPECT_TRUE(retention.MaybeSweep());
  EXPECT_EQ(deleted, std::vector<std::string>{"stale"});
  clock.Advance(absl::Hours(5) + absl::Minutes(59));  // "fresh" is now over a day old, but no sweep is due
  EXPECT_FALSE(retention.MaybeSweep());
  EXPECT_EQ(deleted.size(), 1u);
  clock.Advance(absl::Minutes(1));
  EXPECT_TRUE(retention.MaybeSweep());
  EXPECT_EQ(deleted, (std::vector<std::string>{"stale", "fresh"}));

  // A sweep asked to stop (quarkd shutting down) ends before its next deletion; the next sweep goes on.
  clock.Advance(absl::Hours(6));
  StoreAgedJob(store, clock.Now(), "stale-1", "a", quark::v1::JOB_STATE_FAILED, absl::Hours(50), absl::Hours(49));
  StoreAgedJob(store, clock.Now(), "stale-2", "a", quark::v1::JOB_STATE_FAILED, absl::Hours(50), absl::Hours(49));
  int asked = 0;
  EXPECT_TRUE(retention.MaybeSweep([&] { return ++asked > 1; }));
  EXPECT_EQ(deleted.size(), 3u);
  EXPECT_EQ(deleted.back(), "stale-1");
  ASSERT_TRUE(retention.Sweep().ok());
  EXPECT_EQ(deleted.back(), "stale-2");

  RetentionPolicy off;  // the default keeps everything
  JobRetention keep_all(&store, &clock, off, nullptr);
  EXPECT_FALSE(keep_all.MaybeSweep());
}

/// By count: each tenant keeps its newest max_finished_per_tenant finished jobs, whatever their age; queued and
/// running jobs neither count nor go; another tenant's jobs do not count against it.
inline void ExpectRetentionKeepsEachTenantsNewestFinishedJobs(JobStore& store) {
  using quark::v1::JobState;
  ManualClock clock(absl::FromUnixSeconds(1800000000));
  const absl::Time now = clock.Now();
  const absl::Duration hour = absl::Hours(1);
  for (int i = 0; i < 5; ++i) {  // a-0 is the oldest
    StoreAgedJob(store, now, "a-" + std::to_string(i), "a", JobState::JOB_STATE_SUCCEEDED, (10 - i) * hour,
                 (9 - i) * hour);
  }
  StoreAgedJob(store, now, "a-queued", "a", JobState::JOB_STATE_QUEUED, 20 * hour, 0 * hour);
  StoreAgedJob(store, now, "b-0", "b", JobState::JOB_STATE_CANCELLED, 30 * hour, 29 * hour);
  StoreAgedJob(store, now, "b-1", "b", JobState::JOB_STATE_FAILED, 2 * hour, 1 * hour);
  StoreAgedJob(store, now, "a-5", "a", JobState::JOB_STATE_RUNNING, 1 * hour, 0 * hour);
  RetentionPolicy policy;
  policy.max_finished_per_tenant = 3;
  policy.page_size = 1;
  std::vector<std::string> deleted, reasons;
  JobRetention retention(&store, &clock, policy, [&](const quark::v1::Job& job, int64_t, const std::string& reason) {
    deleted.push_back(job.id());
    reasons.push_back(reason);
  });
  ASSERT_TRUE(retention.Sweep().ok());
  EXPECT_EQ(deleted, (std::vector<std::string>{"a-0", "a-1"}));
  ASSERT_FALSE(reasons.empty());
  EXPECT_EQ(reasons[0], "more than 3 newer finished jobs");
  for (const char* kept : {"a-2", "a-3", "a-4", "a-queued", "a-5", "b-0", "b-1"}) {
    EXPECT_TRUE(store.GetJob(kept).ok()) << kept;
  }
  ASSERT_TRUE(retention.Sweep().ok());  // nothing more to do
  EXPECT_EQ(deleted.size(), 2u);
}

}  // namespace quark::server::testing
