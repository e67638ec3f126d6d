// Memory matching in the PostgreSQL shared queue's claims (tests/server/postgres_fixture.h: a real server): the SQL
// filter (PgWorkerFitSql) gives WorkerFitsJob's answer on every combination of needs and announcements, a small
// worker's claim passes over a big job to the ones behind it and reports it, and a database at migration 3 keeps
// its jobs leasable after the upgrade.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "google/protobuf/util/time_util.h"
#include "server/metrics/registry.h"
#include "server/scheduler/replicated_scheduler.h"
#include "server/scheduler/worker_fit.h"
#include "server/store/postgres_job_store.h"
#include "tests/server/postgres_fixture.h"
#include "tests/support/require_peer.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::TestPostgres;

constexpr int64_t kGiB = int64_t{1} << 30;

class PostgresLeaseMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestPostgres::BinDir().empty()) QUARK_PEER_MISSING() << "PostgreSQL is not installed (scripts/install-deps.sh)";
    ASSERT_EQ(pg_.Start(), "");
    Open();
  }

  void Open() {
    store_.reset();
    auto store = PostgresJobStore::Open(pg_.Dsn());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  void Create(const std::string& id, int64_t host_need, int gpus = 0, int64_t gpu_need = 0, int priority = 0) {
    pb::Job job;
    job.set_id(id);
    job.set_state(pb::JOB_STATE_QUEUED);
    job.mutable_spec()->set_preset("fp8");
    job.mutable_spec()->set_priority(priority);
    job.mutable_spec()->set_max_attempts(3);
    job.mutable_spec()->mutable_resources()->set_gpus(gpus);
    job.set_needs_host_memory_bytes(host_need);
    job.set_needs_gpu_memory_bytes(gpu_need);
    *job.mutable_created_at() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(1700000000000);
    std::vector<pb::JobEvent> events(1);
    events[0].set_state(pb::JOB_STATE_QUEUED);
    bool created = false;
    ASSERT_TRUE(store_->CreateJob(job, &events, &created).ok());
  }

  // Claims for `worker`; the claimed job's id ("" when none) and the jobs it passed over for memory.
  std::string Claim(const std::string& worker_id, const WorkerCapacity& worker,
                    std::vector<MemoryPassOver>* passed_over = nullptr) {
    auto claimed = store_->ClaimNext(
        worker_id, 0,
        [&](int64_t now_ms, LeaseRow* row, std::vector<pb::JobEvent>* events) {
          row->job.set_state(pb::JOB_STATE_RUNNING);
          row->job.set_worker_id(worker_id);
          row->lease_id = "lease-" + row->job.id();
          row->lease_worker = worker_id;
          row->lease_expires_ms = now_ms + 60000;
          events->emplace_back().set_state(pb::JOB_STATE_RUNNING);
          return true;
        },
        {}, worker, passed_over);
    EXPECT_TRUE(claimed.ok()) << claimed.status();
    return claimed.ok() && claimed->has_value() ? (*claimed)->job.id() : "";
  }

  absl::Status Sql(const std::string& sql) {
    auto conn = ConnectPg(pg_.Dsn());
    if (!conn.ok()) return conn.status();
    return PgExecScript(conn->get(), sql);
  }

  TestPostgres pg_;
  std::unique_ptr<PostgresJobStore> store_;
};

// One rule, two spellings: for every job demand and worker announcement in a grid with zeros (unknown), equal and
// one-off values, a claim takes the job exactly when WorkerFitsJob says the worker fits it.
TEST_F(PostgresLeaseMemoryTest, TheClaimFilterGivesWorkerFitsJobsAnswer) {
  const std::vector<int64_t> memory = {0, 8 * kGiB - 1, 8 * kGiB, 8 * kGiB + 1};
  const std::vector<JobDemand> demands = [&] {
    std::vector<JobDemand> out;
    for (int64_t host : memory) {
      out.push_back({0, host, 0});  // a CPU job records no GPU need
      for (int64_t gpu : {int64_t{0}, 8 * kGiB}) out.push_back({1, host, gpu});
    }
    return out;
  }();
  const std::vector<WorkerCapacity> workers = [&] {
    std::vector<WorkerCapacity> out;
    for (int gpus : {0, 1})
      for (int64_t host : {int64_t{0}, 8 * kGiB})
        for (int64_t gpu : memory) out.push_back({gpus, host, gpu});
    return out;
  }();
  int fits = 0;
  int case_number = 0;
  for (const JobDemand& demand : demands) {
    for (const WorkerCapacity& worker : workers) {
      const std::string id = "job-" + std::to_string(case_number++);
      Create(id, demand.host_memory_bytes, demand.gpus, demand.gpu_memory_bytes);
      const bool expected = WorkerFitsJob(worker, demand);
      fits += expected;
      const std::string claimed = Claim("w", worker);
      EXPECT_EQ(claimed, expected ? id : "")
          << "job gpus=" << demand.gpus << " host=" << demand.host_memory_bytes << " gpu=" << demand.gpu_memory_bytes
          << "; worker gpus=" << worker.gpus << " host=" << worker.host_memory_bytes << " gpu=" << worker.gpu_memory_bytes;
      // Nothing left queued for the next case: a job no worker of the grid took is claimed by one that fits all.
      if (claimed.empty()) EXPECT_EQ(Claim("any", WorkerCapacity{8, 0, 0}), id);
    }
  }
  EXPECT_GT(fits, 0);
  EXPECT_LT(fits, case_number) << "the grid must hold both answers";
}

// The fleet on the shared queue: the small worker passes over the 60 GiB job (first in the queue) to the
// ones behind it, reporting it as passed over for memory; the big worker, claiming through another replica, takes it.
TEST_F(PostgresLeaseMemoryTest, ASmallWorkerPassesOverABigJobToTheOnesBehindIt) {
  Create("job-big", 60 * kGiB, 0, 0, /*priority=*/5);
  Create("job-small", 2 * kGiB);
  Create("job-unknown", 0);
  const WorkerCapacity small{0, 24 * kGiB, 0};
  std::vector<MemoryPassOver> passed_over;
  EXPECT_EQ(Claim("small", small, &passed_over), "job-small");
  ASSERT_EQ(passed_over.size(), 1u);
  EXPECT_EQ(passed_over[0].job_id, "job-big");
  EXPECT_EQ(passed_over[0].demand.host_memory_bytes, 60 * kGiB);
  EXPECT_EQ(Claim("small", small, &passed_over), "job-unknown");
  EXPECT_EQ(passed_over.size(), 1u);
  EXPECT_EQ(Claim("small", small, &passed_over), "");
  ASSERT_EQ(passed_over.size(), 1u) << "nothing claimed: every job passed over for memory is reported";
  EXPECT_EQ(passed_over[0].job_id, "job-big");

  auto other_replica = PostgresJobStore::Open(pg_.Dsn());
  ASSERT_TRUE(other_replica.ok()) << other_replica.status();
  std::swap(store_, *other_replica);
  EXPECT_EQ(Claim("big", WorkerCapacity{0, 128 * kGiB, 0}, &passed_over), "job-big");
  EXPECT_TRUE(passed_over.empty());
}

// Through a ReplicatedScheduler (what quarkd runs on PostgreSQL): the skips are counted at every claim, and the job
// says once in its events why it waits.
TEST_F(PostgresLeaseMemoryTest, TheReplicatedSchedulerCountsPassOversAndNotesThemOncePerJob) {
  metrics::Registry registry;
  ServerMetrics metrics(&registry);
  ReplicatedScheduler replica(store_.get(), store_.get(), SystemClock::Get(), nullptr, &metrics, SchedulerOptions());
  const auto submit = [&](int64_t need, int priority) {
    pb::JobSpec spec;
    spec.set_preset("fp8");
    spec.set_priority(priority);
    SubmitOptions options;
    options.needs_host_memory_bytes = need;
    auto job = replica.Submit("", spec, options);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  };
  const auto register_worker = [&](const std::string& id, int64_t host_memory) {
    pb::internal::RegisterRequest request;
    request.set_worker_id(id);
    request.set_slots(2);  // room for a second claim after the first
    request.add_devices("cpu");
    request.mutable_throughput()->set_host_memory_bytes(host_memory);
    replica.Register(request);
  };
  const auto lease_now = [&](const std::string& worker) {
    std::promise<std::string> leased;
    replica.Lease(worker, absl::ZeroDuration(),
                  [&](pb::internal::LeaseResponse response) { leased.set_value(response.job().id()); });
    return leased.get_future().get();
  };
  const std::string big = submit(60 * kGiB, 5);
  const std::string small = submit(2 * kGiB, 0);
  register_worker("small", 24 * kGiB);
  register_worker("big", 128 * kGiB);
  EXPECT_EQ(lease_now("small"), small);
  EXPECT_EQ(lease_now("small"), "");
  EXPECT_EQ(metrics.lease_memory_skips.WithLabels({"host"}).Value(), 2);
  auto events = store_->ListEvents(big, 0, 100);
  ASSERT_TRUE(events.ok()) << events.status();
  std::vector<std::string> logs;
  for (const pb::JobEvent& event : *events) {
    if (!event.log().empty()) logs.push_back(event.log());
  }
  EXPECT_EQ(logs, std::vector<std::string>{"waiting for a worker with >= 60.0 GiB host memory (worker small has 24.0 GiB)"});
  EXPECT_EQ(lease_now("big"), big);
  replica.Shutdown();
}

// A database at migration 3 (before the memory columns) with a queued job: the upgrade keeps it leasable by any
// worker (its need reads 0, unknown) and new jobs are matched.
TEST_F(PostgresLeaseMemoryTest, JobsQueuedAtMigration3StayLeasableAfterTheUpgrade) {
  Create("job-old", 0);
  store_.reset();
  ASSERT_TRUE(Sql("ALTER TABLE jobs DROP COLUMN host_memory_bytes, DROP COLUMN gpu_memory_bytes; "
                  "DELETE FROM schema_version WHERE version >= 4")
                  .ok());
  {
    auto conn = ConnectPg(pg_.Dsn());
    ASSERT_TRUE(conn.ok()) << conn.status();
    auto version = PgExec(conn->get(), "SELECT MAX(version) FROM schema_version");
    ASSERT_TRUE(version.ok()) << version.status();
    ASSERT_EQ(version->Int(0, 0), 3);
  }
  Open();
  Create("job-new", 60 * kGiB);
  const WorkerCapacity tiny{0, 1 * kGiB, 0};
  EXPECT_EQ(Claim("tiny", tiny), "job-old");
  EXPECT_EQ(Claim("tiny", tiny), "") << "job-new needs 60 GiB";
  EXPECT_EQ(Claim("big", WorkerCapacity{0, 64 * kGiB, 0}), "job-new");
}

}  // namespace
}  // namespace quark::server
