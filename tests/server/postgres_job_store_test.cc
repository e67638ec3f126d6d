// PostgresJobStore against a real PostgreSQL (tests/server/postgres_fixture.h): the JobStore contract as the
// SQLite store keeps it, and the shared queue under two store instances (two "replicas") racing on one database.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "server/store/audit_retention.h"
#include "server/store/postgres_job_store.h"
#include "tests/server/postgres_fixture.h"
#include "tests/server/storage_quota_store_checks.h"
#include "tests/support/require_peer.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::TestPostgres;

class PostgresJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestPostgres::BinDir().empty()) QUARK_PEER_MISSING() << "PostgreSQL is not installed (scripts/install-deps.sh)";
    std::string error = pg_.Start();
    ASSERT_EQ(error, "");
    auto a = PostgresJobStore::Open(pg_.Dsn());
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = PostgresJobStore::Open(pg_.Dsn());  // a second replica: migrations already applied
    ASSERT_TRUE(b.ok()) << b.status();
    a_ = std::move(*a);
    b_ = std::move(*b);
  }

  static pb::Job NewJob(const std::string& id, const std::string& request_id = "", int priority = 0) {
    pb::Job job;
    job.set_id(id);
    job.set_request_id(request_id);
    job.set_state(pb::JOB_STATE_QUEUED);
    job.mutable_spec()->set_preset("fp8");
    job.mutable_spec()->set_priority(priority);
    job.mutable_spec()->set_max_attempts(3);
    *job.mutable_created_at() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(1700000000000);
    return job;
  }

  static std::vector<pb::JobEvent> StateEvents() {
    pb::JobEvent event;
    event.set_state(pb::JOB_STATE_QUEUED);
    return {event};
  }

  static RowUpdate ClaimFor(const std::string& worker, const std::string& lease, int64_t ttl_ms) {
    return [=](int64_t now_ms, LeaseRow* row, std::vector<pb::JobEvent>* events) {
      row->job.set_state(pb::JOB_STATE_RUNNING);
      row->job.set_worker_id(worker);
      row->job.add_attempts()->set_worker_id(worker);
      row->lease_id = lease;
      row->lease_worker = worker;
      row->lease_expires_ms = now_ms + ttl_ms;
      events->emplace_back().set_state(pb::JOB_STATE_RUNNING);
      return true;
    };
  }

  TestPostgres pg_;
  std::unique_ptr<PostgresJobStore> a_, b_;
};

TEST_F(PostgresJobStoreTest, JobsEventsAndPagesRoundTrip) {
  for (int i = 0; i < 5; ++i) {
    std::vector<pb::JobEvent> events = StateEvents();
    bool created = false;
    auto stored = a_->CreateJob(NewJob("job-" + std::to_string(i)), &events, &created);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_TRUE(created);
    EXPECT_EQ(events[0].sequence(), 1);
  }
  auto job = b_->GetJob("job-3");  // written through one replica, read through the other
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->spec().preset(), "fp8");
  EXPECT_EQ(b_->GetJob("job-x").status().code(), absl::StatusCode::kNotFound);
  std::vector<pb::JobEvent> more(2);
  more[0].set_log("one");
  more[1].set_log("two");
  ASSERT_TRUE(b_->UpdateJob(*job, &more).ok());
  EXPECT_EQ(more[1].sequence(), 3);
  auto events = a_->ListEvents("job-3", 1, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].log(), "two");
  auto page = a_->ListJobs({}, 3, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 3u);
  EXPECT_EQ(page->jobs[0].id(), "job-4");  // newest first
  auto rest = a_->ListJobs({}, 3, page->next_page_token);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->jobs.size(), 2u);
  EXPECT_EQ(rest->jobs[1].id(), "job-0");
  EXPECT_EQ(a_->ListJobs({}, 3, "x").status().code(), absl::StatusCode::kInvalidArgument);
  auto counts = a_->CountJobs();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[std::make_pair(pb::JOB_STATE_QUEUED, std::string("fp8"))], 5);
}

// PostgreSQL restarted (the chaos run's restart-postgres): every pooled connection is dead, and libpq learns it only
// from a failed query. Reads reset the connection and run again, so the first GetJob after the restart answers
// instead of failing (WatchJob of a finished job used to end with "server closed the connection unexpectedly").
TEST_F(PostgresJobStoreTest, ReadsAfterAPostgresRestartReconnectAndAnswer) {
  std::vector<pb::JobEvent> events = StateEvents();
  bool created = false;
  ASSERT_TRUE(a_->CreateJob(NewJob("job-r"), &events, &created).ok());
  ASSERT_TRUE(a_->GetJob("job-r").ok());
  ASSERT_EQ(pg_.Restart(), "");
  for (int i = 0; i < 8; ++i) {  // more calls than the pool has connections: each dead one is met once
    auto job = a_->GetJob("job-r");
    EXPECT_TRUE(job.ok()) << i << ": " << job.status();
    auto listed = a_->ListEvents("job-r", 0, 10);
    EXPECT_TRUE(listed.ok()) << i << ": " << listed.status();
  }
  EXPECT_TRUE(a_->CountJobs().ok());
  EXPECT_EQ(a_->GetJob("job-x").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PostgresJobStoreTest, OneRequestIdMakesOneJobAcrossReplicasRacing) {
  std::atomic<int> created_count{0};
  std::set<std::string> ids;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      PostgresJobStore* store = i % 2 ? a_.get() : b_.get();
      std::vector<pb::JobEvent> events = StateEvents();
      bool created = false;
      auto stored = store->CreateJob(NewJob("job-race-" + std::to_string(i), "req-1"), &events, &created);
      ASSERT_TRUE(stored.ok()) << stored.status();
      if (created) created_count++;
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(stored->job.id());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created_count.load(), 1);
  EXPECT_EQ(ids.size(), 1u);
  // Another tenant's request id of the same text is another job.
  pb::Job other = NewJob("job-other", "req-1");
  other.set_tenant("t2");
  bool created = false;
  std::vector<pb::JobEvent> events = StateEvents();
  ASSERT_TRUE(a_->CreateJob(other, &events, &created).ok());
  EXPECT_TRUE(created);
}

// A job asking for GPUs (JobSpec.resources.gpus) is passed over by claims of workers with fewer, whichever replica
// claims; a worker with enough takes it, ahead of later jobs.
TEST_F(PostgresJobStoreTest, ClaimsPassOverJobsNeedingMoreGpusThanTheWorkerHas) {
  const auto create = [&](const std::string& id, int gpus) {
    pb::Job job = NewJob(id);
    job.mutable_spec()->mutable_resources()->set_gpus(gpus);
    std::vector<pb::JobEvent> events = StateEvents();
    bool created = false;
    ASSERT_TRUE(a_->CreateJob(job, &events, &created).ok());
  };
  create("job-gpu2", 2);
  create("job-cpu", 0);
  auto cpu = b_->ClaimNext("cpu-worker", 0, ClaimFor("cpu-worker", "lease-1", 60000), {}, WorkerCapacity{/*gpus=*/0});
  ASSERT_TRUE(cpu.ok() && cpu->has_value()) << cpu.status();
  EXPECT_EQ((*cpu)->job.id(), "job-cpu");
  auto one_gpu = a_->ClaimNext("one-gpu", 0, ClaimFor("one-gpu", "lease-2", 60000), {}, WorkerCapacity{/*gpus=*/1});
  ASSERT_TRUE(one_gpu.ok());
  EXPECT_FALSE(one_gpu->has_value()) << "job-gpu2 asks for 2 GPUs";
  auto two_gpus = a_->ClaimNext("two-gpus", 0, ClaimFor("two-gpus", "lease-3", 60000), {}, WorkerCapacity{/*gpus=*/2});
  ASSERT_TRUE(two_gpus.ok() && two_gpus->has_value()) << two_gpus.status();
  EXPECT_EQ((*two_gpus)->job.id(), "job-gpu2");
}

TEST_F(PostgresJobStoreTest, ClaimsNeverHandOneJobToTwoWorkers) {
  constexpr int kJobs = 120;
  for (int i = 0; i < kJobs; ++i) {
    std::vector<pb::JobEvent> events = StateEvents();
    bool created = false;
    ASSERT_TRUE(a_->CreateJob(NewJob("job-" + std::to_string(1000 + i), "", i % 3), &events, &created).ok());
  }
  std::mutex mu;
  std::map<std::string, std::string> claimed_by;  // job -> worker
  std::vector<std::string> duplicates;
  std::vector<int> first_priorities;
  std::vector<std::thread> threads;
  for (int w = 0; w < 6; ++w) {
    threads.emplace_back([&, w] {
      PostgresJobStore* store = w % 2 ? a_.get() : b_.get();
      std::string worker = "w" + std::to_string(w);
      for (int n = 0;; ++n) {
        auto row = store->ClaimNext(worker, 0, ClaimFor(worker, worker + "-lease-" + std::to_string(n), 60000));
        ASSERT_TRUE(row.ok()) << row.status();
        if (!row->has_value()) return;
        std::lock_guard<std::mutex> lock(mu);
        if (!claimed_by.emplace((*row)->job.id(), worker).second) duplicates.push_back((*row)->job.id());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(duplicates.empty()) << duplicates.size() << " jobs claimed twice";
  EXPECT_EQ(claimed_by.size(), static_cast<size_t>(kJobs));
  auto queued = a_->CountInState(pb::JOB_STATE_QUEUED, "");
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(*queued, 0);
  // Each job's log: QUEUED (1) then RUNNING (2), no gaps, no second RUNNING.
  for (const auto& [job_id, worker] : claimed_by) {
    auto events = b_->ListEvents(job_id, 0, 10);
    ASSERT_TRUE(events.ok());
    ASSERT_EQ(events->size(), 2u) << job_id;
    EXPECT_EQ((*events)[1].sequence(), 2);
  }
}

// Tenants' max_running_jobs with replicas: a claim passes over the jobs of a tenant that runs as many as allowed,
// counted in the shared store, and claims racing from two replicas never exceed the limit.
TEST_F(PostgresJobStoreTest, TenantRunningLimitsHoldAcrossReplicas) {
  auto create = [&](const std::string& id, const std::string& tenant) {
    pb::Job job = NewJob(id);
    job.set_tenant(tenant);
    std::vector<pb::JobEvent> events = StateEvents();
    bool created = false;
    ASSERT_TRUE(a_->CreateJob(job, &events, &created).ok());
  };
  create("job-a1", "a");
  create("job-a2", "a");
  create("job-b1", "b");
  std::map<std::string, int64_t> limits = {{"a", 1}};
  auto first = a_->ClaimNext("w1", 0, ClaimFor("w1", "lease-1", 60000), limits);
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  EXPECT_EQ((*first)->job.id(), "job-a1");
  auto second = b_->ClaimNext("w2", 0, ClaimFor("w2", "lease-2", 60000), limits);  // the other replica
  ASSERT_TRUE(second.ok() && second->has_value()) << second.status();
  EXPECT_EQ((*second)->job.id(), "job-b1") << "job-a2 is over tenant a's limit";
  auto none = a_->ClaimNext("w3", 0, ClaimFor("w3", "lease-3", 60000), limits);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // job-a1 ends: tenant a has a free place again.
  auto finished = b_->UpdateLeasedRow("lease-1", [](int64_t, LeaseRow* row, std::vector<pb::JobEvent>* events) {
    row->job.set_state(pb::JOB_STATE_SUCCEEDED);
    row->lease_id.clear();
    events->emplace_back().set_state(pb::JOB_STATE_SUCCEEDED);
    return true;
  });
  ASSERT_TRUE(finished.ok()) << finished.status();
  auto third = a_->ClaimNext("w3", 0, ClaimFor("w3", "lease-4", 60000), limits);
  ASSERT_TRUE(third.ok() && third->has_value());
  EXPECT_EQ((*third)->job.id(), "job-a2");

  // Racing: 8 threads on two replicas claim tenant c's 30 jobs under a limit of 3.
  for (int i = 0; i < 30; ++i) create("job-c" + std::to_string(i), "c");
  limits = {{"a", 1}, {"c", 3}};
  std::atomic<int> claimed{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 8; ++w) {
    threads.emplace_back([&, w] {
      PostgresJobStore* store = w % 2 ? a_.get() : b_.get();
      std::string worker = "c" + std::to_string(w);
      for (int n = 0;; ++n) {
        auto row = store->ClaimNext(worker, 0, ClaimFor(worker, worker + "-" + std::to_string(n), 60000), limits);
        ASSERT_TRUE(row.ok()) << row.status();
        if (!row->has_value()) return;
        ++claimed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(claimed.load(), 3);
  auto running = a_->CountInState(pb::JOB_STATE_RUNNING, "c");
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(*running, 3);
}

TEST_F(PostgresJobStoreTest, ClaimOrderAndSlotLimitAndLeaseExpiryOnTheDatabaseClock) {
  for (int i = 0; i < 3; ++i) {
    std::vector<pb::JobEvent> events = StateEvents();
    bool created = false;
    ASSERT_TRUE(a_->CreateJob(NewJob("job-p" + std::to_string(i), "", i == 2 ? 5 : 0), &events, &created).ok());
  }
  auto first = a_->ClaimNext("w", 1, ClaimFor("w", "lease-1", 200));
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->job.id(), "job-p2");  // priority first
  auto full = b_->ClaimNext("w", 1, ClaimFor("w", "lease-2", 200));  // w holds its one slot
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(full->has_value());
  auto renewed = b_->RenewLease("lease-1", 200);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_FALSE(*renewed);
  EXPECT_EQ(b_->RenewLease("lease-zzz", 200).status().code(), absl::StatusCode::kNotFound);
  auto requeue = [](int64_t, LeaseRow* row, std::vector<pb::JobEvent>* events) {
    row->job.set_state(pb::JOB_STATE_QUEUED);
    row->lease_id.clear();
    events->emplace_back().set_state(pb::JOB_STATE_QUEUED);
    return true;
  };
  auto none = a_->UpdateStaleRows(SharedJobQueue::Stale::kLeaseExpired, "", 10, requeue);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());  // 200 ms have not passed on the database clock
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto expired = b_->UpdateStaleRows(SharedJobQueue::Stale::kLeaseExpired, "", 10, requeue);
  ASSERT_TRUE(expired.ok()) << expired.status();
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ((*expired)[0].job.id(), "job-p2");
  EXPECT_EQ(a_->RenewLease("lease-1", 200).status().code(), absl::StatusCode::kNotFound);
  auto again = a_->ClaimNext("w", 1, ClaimFor("w", "lease-3", 60000));
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->job.id(), "job-p2");
  EXPECT_EQ((*again)->job.attempts_size(), 2);
}

TEST_F(PostgresJobStoreTest, ContentKeysFollowersAndDeadlines) {
  std::vector<pb::JobEvent> events = StateEvents();
  bool created = false;
  pb::Job leader = NewJob("job-leader");
  leader.set_tenant("a");
  leader.set_content_key("k1");
  ASSERT_TRUE(a_->CreateJob(leader, &events, &created).ok());
  pb::Job follower = NewJob("job-follower");
  follower.set_tenant("a");
  follower.set_content_key("k1");
  follower.set_deduplicated_from("job-leader");
  events = StateEvents();
  ASSERT_TRUE(a_->CreateJob(follower, &events, &created).ok());
  pb::Job late = NewJob("job-late");
  late.mutable_spec()->set_deadline_seconds(1);
  events = StateEvents();
  ASSERT_TRUE(a_->CreateJob(late, &events, &created).ok());

  EXPECT_EQ(*b_->CountInState(pb::JOB_STATE_QUEUED, "a"), 1) << "a follower takes no queued slot";

  // Newest first among the queued ones; never another tenant's.
  absl::StatusOr<pb::Job> found = b_->FindByContentKey("a", "k1");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->id(), "job-follower");
  EXPECT_EQ(b_->FindByContentKey("", "k1").status().code(), absl::StatusCode::kNotFound);

  // A follower is never claimed: two claims take the leader and the late job, the third finds nothing.
  std::set<std::string> claimed;
  for (int i = 0; i < 3; ++i) {
    auto row = a_->ClaimNext("w" + std::to_string(i), 1, ClaimFor("w" + std::to_string(i), "l" + std::to_string(i), 60000));
    ASSERT_TRUE(row.ok()) << row.status();
    if (row->has_value()) claimed.insert((*row)->job.id());
  }
  EXPECT_EQ(claimed, (std::set<std::string>{"job-leader", "job-late"}));

  // The follower takes its leader's state through UpdateFollowers.
  auto mirrored = b_->UpdateFollowers(10, [](int64_t, const pb::Job& l, LeaseRow* row, std::vector<pb::JobEvent>* ev) {
    row->job.set_state(l.state());
    ev->emplace_back().set_state(l.state());
    return true;
  });
  ASSERT_TRUE(mirrored.ok()) << mirrored.status();
  ASSERT_EQ(mirrored->size(), 1u);
  EXPECT_EQ((*mirrored)[0].job.id(), "job-follower");
  EXPECT_EQ(a_->GetJob("job-follower")->state(), pb::JOB_STATE_RUNNING);
  EXPECT_TRUE(b_->UpdateFollowers(10, [](int64_t, const pb::Job&, LeaseRow*, std::vector<pb::JobEvent>*) {
                  return true;
                })->empty()) << "in step now";

  // Past its deadline on the database clock, the late job is picked once its stop is not yet asked for.
  auto pick = [&] {
    return a_->UpdateStaleRows(SharedJobQueue::Stale::kDeadlinePassed, "", 10,
                               [](int64_t now_ms, LeaseRow* row, std::vector<pb::JobEvent>*) {
                                 row->cancel_requested = true;
                                 row->cancel_deadline_ms = now_ms + 60000;
                                 return true;
                               });
  };
  auto none = pick();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  auto passed = pick();
  ASSERT_TRUE(passed.ok()) << passed.status();
  ASSERT_EQ(passed->size(), 1u);
  EXPECT_EQ((*passed)[0].job.id(), "job-late");
  EXPECT_TRUE(pick()->empty()) << "its stop was asked for";
}

// #29: the audit log is bounded (audit_retention.h), as in the SQLite store.
TEST_F(PostgresJobStoreTest, AuditLogKeepsItsNewestRecordsAndOnlyThoseAreAppendOnly) {
  ASSERT_TRUE(pg_.Psql(absl::StrCat("INSERT INTO audit_log (time_unix_ms, tenant, record) SELECT 0, 'old', ''::bytea ",
                                    "FROM generate_series(1, ", kAuditLogMaxRecords, ")")));
  for (int64_t expected_first : {2, 3}) {
    pb::AuditRecord record;
    record.set_tenant("t");
    record.set_action("submit");
    ASSERT_TRUE(a_->AppendAudit(&record).ok());
    EXPECT_EQ(record.sequence(), kAuditLogMaxRecords + expected_first - 1);
    auto first = b_->ListAudit(0, 1, "");
    ASSERT_TRUE(first.ok() && first->size() == 1u);
    EXPECT_EQ((*first)[0].sequence(), expected_first) << "the oldest records expire, one per append";
  }
  EXPECT_FALSE(pg_.Psql("DELETE FROM audit_log WHERE sequence = 3"));
  EXPECT_FALSE(pg_.Psql(absl::StrCat("DELETE FROM audit_log WHERE sequence = ", kAuditLogMaxRecords + 2)));
  EXPECT_FALSE(pg_.Psql("UPDATE audit_log SET tenant = 'x' WHERE sequence = 3"));
  EXPECT_FALSE(pg_.Psql("TRUNCATE audit_log"));
  auto kept = b_->ListAudit(kAuditLogMaxRecords, 10, "");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->size(), 2u);
}

TEST_F(PostgresJobStoreTest, AuditLogIsAppendOnlyAndNotificationsArrive) {
  std::mutex mu;
  std::vector<std::string> heard;
  std::atomic<int> connected{0};
  b_->StartListening(
      [&](const std::string& channel, const std::string& payload) {
        std::lock_guard<std::mutex> lock(mu);
        heard.push_back(channel + ":" + payload);
      },
      [&] { connected++; });
  ASSERT_TRUE(testing::WaitFor([&] { return connected.load() > 0; }));
  pb::AuditRecord record;
  record.set_tenant("t1");
  record.set_action("submit");
  ASSERT_TRUE(a_->AppendAudit(&record).ok());
  EXPECT_EQ(record.sequence(), 1);
  auto listed = b_->ListAudit(0, 10, "t1");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].action(), "submit");
  EXPECT_FALSE(pg_.Psql("UPDATE audit_log SET tenant = 'x'"));
  EXPECT_FALSE(pg_.Psql("DELETE FROM audit_log"));
  EXPECT_TRUE(pg_.Psql("SELECT 1 FROM audit_log"));
  std::vector<pb::JobEvent> events = StateEvents();
  bool created = false;
  ASSERT_TRUE(a_->CreateJob(NewJob("job-n"), &events, &created).ok());
  EXPECT_TRUE(testing::WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return std::count(heard.begin(), heard.end(), "quark_events:job-n 1") == 1 &&
           std::count(heard.begin(), heard.end(), "quark_queue:job-n") == 1;
  }));
  b_->StopListening();
}

// #29 storage quota on the shared store; a second replica sees the same bytes.
TEST_F(PostgresJobStoreTest, TenantStoredBytesCountEveryStateAndDeleteJobFreesThem) {
  testing::ExpectStoredBytesAndDeletion(*a_);
  EXPECT_EQ(*b_->TenantStoredBytes("a"), *a_->TenantStoredBytes("a"));
  EXPECT_EQ(b_->GetJob("job-a2").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PostgresJobStoreTest, AttemptRowsCountInTheTenantsStoredBytes) { testing::ExpectAttemptRowsCount(*a_); }

}  // namespace
}  // namespace quark::server
