// The #29 storage-quota contract of a JobStore, run against SQLite (job_store_test) and a real PostgreSQL
// (postgres_job_store_test): TenantStoredBytes counts every job row and event of a tenant in any state,
// DeleteJob frees exactly what it counted, refuses unfinished jobs and takes the events and attempts along; attempt
// rows count too (ExpectAttemptRowsCount).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/store/job_store.h"

namespace quark::server::testing {

inline quark::v1::Job QuotaJob(const std::string& id, const std::string& tenant, size_t label_bytes) {
  quark::v1::Job job;
  job.set_id(id);
  job.set_tenant(tenant);
  job.set_state(quark::v1::JOB_STATE_QUEUED);
  job.mutable_spec()->set_model_uri("file:///models/" + tenant);
  job.mutable_spec()->set_preset("w_int8_a_int8_per_tensor_sym");
  (*job.mutable_spec()->mutable_labels())["pad"] = std::string(label_bytes, 'x');
  job.mutable_created_at()->set_seconds(1700000000);
  return job;
}

/// Creates `id`, moves it to `final_state` with an event carrying the job (as the schedulers write state changes)
/// and returns the bytes this adds: the final row plus both events.
inline int64_t CreateAndFinish(JobStore& store, const std::string& id, const std::string& tenant, size_t label_bytes,
                               quark::v1::JobState final_state) {
  quark::v1::Job job = QuotaJob(id, tenant, label_bytes);
  std::vector<quark::v1::JobEvent> events(1);
  events[0].set_state(job.state());
  *events[0].mutable_job() = job;
  bool created = false;
  EXPECT_TRUE(store.CreateJob(job, &events, &created).ok());
  int64_t bytes = static_cast<int64_t>(events[0].SerializeAsString().size());
  if (final_state == quark::v1::JOB_STATE_QUEUED) return bytes + static_cast<int64_t>(job.SerializeAsString().size());
  job.set_state(final_state);
  std::vector<quark::v1::JobEvent> more(1);
  more[0].set_state(final_state);
  *more[0].mutable_job() = job;
  EXPECT_TRUE(store.UpdateJob(job, &more).ok());
  return bytes + static_cast<int64_t>(more[0].SerializeAsString().size() + job.SerializeAsString().size());
}

inline void ExpectStoredBytesAndDeletion(JobStore& store) {
  EXPECT_EQ(*store.TenantStoredBytes("a"), 0);
  int64_t a = CreateAndFinish(store, "job-a1", "a", 4000, quark::v1::JOB_STATE_CANCELLED);
  a += CreateAndFinish(store, "job-a2", "a", 9000, quark::v1::JOB_STATE_SUCCEEDED);
  const int64_t queued = CreateAndFinish(store, "job-a3", "a", 100, quark::v1::JOB_STATE_QUEUED);
  const int64_t b = CreateAndFinish(store, "job-b1", "b", 2000, quark::v1::JOB_STATE_FAILED);
  // Cancelled and finished jobs count, with their events; another tenant's rows never do.
  EXPECT_EQ(*store.TenantStoredBytes("a"), a + queued);
  EXPECT_EQ(*store.TenantStoredBytes("b"), b);
  EXPECT_GT(a, 13000 * 3);  // the spec is in the row and in each state event

  absl::StatusOr<int64_t> refused = store.DeleteJob("job-a3");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("JOB_STATE_QUEUED"), std::string::npos) << refused.status();
  EXPECT_EQ(store.DeleteJob("job-404").status().code(), absl::StatusCode::kNotFound);

  const int64_t before = *store.TenantStoredBytes("a");
  absl::StatusOr<int64_t> freed = store.DeleteJob("job-a2");
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*store.TenantStoredBytes("a"), before - *freed);
  freed = store.DeleteJob("job-a1");
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*store.TenantStoredBytes("a"), queued);
  EXPECT_EQ(store.GetJob("job-a1").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<quark::v1::JobEvent>> events = store.ListEvents("job-a1", 0, 100);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  EXPECT_EQ(store.DeleteJob("job-a1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*store.TenantStoredBytes("b"), b);
  // What remains is whole: the queued job is still listed and loaded for the queue.
  absl::StatusOr<std::vector<StoredJob>> loaded = store.LoadJobs({quark::v1::JOB_STATE_QUEUED});
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ((*loaded)[0].job.id(), "job-a3");
}

/// Attempt rows count in the tenant's bytes too (#29): each as its job id, worker id and error in UTF-8 bytes plus
/// 24 (its number and two times). Rewriting the same attempts (every state change does) adds nothing; a changed
/// error moves the count by the difference; DeleteJob frees them with the rest.
inline void ExpectAttemptRowsCount(JobStore& store) {
  auto attempt_bytes = [](const std::string& job_id, const quark::v1::Attempt& attempt) {
    return static_cast<int64_t>(job_id.size() + attempt.worker_id().size() + attempt.error().size() + 24);
  };
  quark::v1::Job job = QuotaJob("job-t1", "t", 100);
  std::vector<quark::v1::JobEvent> events(1);
  events[0].set_state(job.state());
  bool created = false;
  ASSERT_TRUE(store.CreateJob(job, &events, &created).ok());
  const int64_t event_bytes = static_cast<int64_t>(events[0].SerializeAsString().size());
  auto row_bytes = [&] { return static_cast<int64_t>(job.SerializeAsString().size()); };
  EXPECT_EQ(*store.TenantStoredBytes("t"), row_bytes() + event_bytes);

  job.set_state(quark::v1::JOB_STATE_RUNNING);
  quark::v1::Attempt* first = job.add_attempts();
  first->set_number(1);
  first->set_worker_id("wörker-1");  // UTF-8: 9 bytes, 8 characters
  first->mutable_started_at()->set_seconds(1700000100);
  std::vector<quark::v1::JobEvent> none;
  ASSERT_TRUE(store.UpdateJob(job, &none).ok());
  EXPECT_EQ(*store.TenantStoredBytes("t"), row_bytes() + event_bytes + attempt_bytes("job-t1", *first));

  first->set_error(std::string(3000, 'e') + " lease lost");
  first->mutable_ended_at()->set_seconds(1700000200);
  quark::v1::Attempt* second = job.add_attempts();
  second->set_number(2);
  second->set_worker_id("worker-2");
  second->mutable_started_at()->set_seconds(1700000300);
  ASSERT_TRUE(store.UpdateJob(job, &none).ok());
  const int64_t both = attempt_bytes("job-t1", job.attempts(0)) + attempt_bytes("job-t1", job.attempts(1));
  EXPECT_GT(both, 3000);
  EXPECT_EQ(*store.TenantStoredBytes("t"), row_bytes() + event_bytes + both);
  ASSERT_TRUE(store.UpdateJob(job, &none).ok());  // the same attempts written again
  EXPECT_EQ(*store.TenantStoredBytes("t"), row_bytes() + event_bytes + both);

  job.set_state(quark::v1::JOB_STATE_FAILED);
  ASSERT_TRUE(store.UpdateJob(job, &none).ok());
  absl::StatusOr<int64_t> freed = store.DeleteJob("job-t1");
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*freed, row_bytes() + event_bytes + both);
  EXPECT_EQ(*store.TenantStoredBytes("t"), 0);
}

}  // namespace quark::server::testing
