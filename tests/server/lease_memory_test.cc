// Memory matching at lease time in the single-replica scheduler on a real SQLite store: a job whose estimated peak
// memory (Job.needs_*, recorded at SubmitJob) is above what a worker announced is left for a worker with enough,
// and the smaller worker goes on with the jobs behind it. 0 on either side is unknown and fits. Jobs stored by the
// previous schema (no memory columns) stay leasable.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "server/metrics/registry.h"
#include "server/scheduler/job_scheduler.h"
#include "server/store/job_store_schema.h"
#include "server/store/sqlite_job_store.h"
#include "tests/server/scheduler_fixture.h"

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::JobState;
using quark::v1::internal::LeaseResponse;
using quark::v1::internal::RegisterRequest;

constexpr int64_t kGiB = int64_t{1} << 30;

class LeaseMemoryTest : public testing::SchedulerFixture {
 protected:
  LeaseMemoryTest() : SchedulerFixture(LeaseTimeout10s()) {}

  static SchedulerOptions LeaseTimeout10s() {
    SchedulerOptions options;
    options.lease_timeout = absl::Seconds(10);
    return options;
  }

  Job Submit(int64_t host_need, int gpus = 0, int64_t gpu_need = 0, int priority = 0) {
    quark::v1::JobSpec spec;
    spec.set_model_uri("file:///m");
    spec.set_output_uri("file:///out");
    spec.set_preset("w_int8_a_int8_per_tensor_sym");
    spec.set_priority(priority);
    spec.mutable_resources()->set_gpus(gpus);
    SubmitOptions options;
    options.needs_host_memory_bytes = host_need;
    options.needs_gpu_memory_bytes = gpu_need;
    absl::StatusOr<Job> job = scheduler_->Submit("", spec, options);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job();
  }

  // A worker announcing `host_memory` (and `gpu_memory` on `devices`) as its throughput probe does; 0 = unknown.
  void Register(const std::string& worker_id, int64_t host_memory, int slots = 1, int64_t gpu_memory = 0,
                std::vector<std::string> devices = {"cpu"}) {
    RegisterRequest request;
    request.set_worker_id(worker_id);
    request.set_slots(slots);
    for (const std::string& device : devices) request.add_devices(device);
    if (host_memory > 0 || gpu_memory > 0) {
      request.mutable_throughput()->set_host_memory_bytes(host_memory);
      request.mutable_throughput()->set_gpu_memory_bytes(gpu_memory);
    }
    scheduler_->Register(request);
  }

  JobState StateOf(const std::string& id) { return store_->GetJob(id)->state(); }

  double Skips(const std::string& resource) { return metrics_.lease_memory_skips.WithLabels({resource}).Value(); }
};

// The fleet of the issue: a 24 GiB worker and a 128 GiB one. The 60 GiB job, first in the queue, goes to the big
// worker only; the small one takes the jobs queued after it (no head-of-line blocking), the unknown one included.
TEST_F(LeaseMemoryTest, ABigJobGoesOnlyToTheBigWorkerAndTheSmallOneTakesTheJobsBehindIt) {
  Job big = Submit(60 * kGiB, 0, 0, /*priority=*/5);
  Job small = Submit(2 * kGiB);
  Job unknown = Submit(0);
  EXPECT_EQ(store_->GetJob(big.id())->needs_host_memory_bytes(), 60 * kGiB) << "recorded in the job (GetJob)";

  Register("small", 24 * kGiB, /*slots=*/3);
  std::optional<LeaseResponse> first = LeaseNow("small");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->job().id(), small.id());
  EXPECT_EQ(Skips("host"), 1);
  std::optional<LeaseResponse> second = LeaseNow("small");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->job().id(), unknown.id()) << "a job of unknown need fits any worker";
  EXPECT_FALSE(LeaseNow("small").has_value()) << "a free slot, but only the 60 GiB job is left";
  EXPECT_EQ(StateOf(big.id()), JobState::JOB_STATE_QUEUED);
  EXPECT_EQ(Skips("host"), 3) << "every lease that passed over it counts";
  EXPECT_EQ(Skips("gpu"), 0);
  // Why it waits, in its events (WatchJob), once and not once per lease.
  auto events = store_->ListEvents(big.id(), 0, 100);
  ASSERT_TRUE(events.ok()) << events.status();
  std::vector<std::string> logs;
  for (const quark::v1::JobEvent& event : *events) {
    if (!event.log().empty()) logs.push_back(event.log());
  }
  EXPECT_EQ(logs, std::vector<std::string>{"waiting for a worker with >= 60.0 GiB host memory (worker small has 24.0 GiB)"});

  Register("big", 128 * kGiB);
  std::optional<LeaseResponse> leased = LeaseNow("big");
  ASSERT_TRUE(leased.has_value());
  EXPECT_EQ(leased->job().id(), big.id());
}

// A parked Lease of the small worker is not answered with a job it cannot hold, and is with the next one it can.
TEST_F(LeaseMemoryTest, AParkedSmallWorkerIsAnsweredOnlyWithAJobThatFitsIt) {
  Register("small", 24 * kGiB);
  std::optional<LeaseResponse> parked;
  scheduler_->Lease("small", absl::Seconds(30), [&](LeaseResponse r) { parked = std::move(r); });
  Job big = Submit(25 * kGiB);
  EXPECT_FALSE(parked.has_value());
  Job fits = Submit(24 * kGiB);  // exactly the worker's memory fits
  ASSERT_TRUE(parked.has_value());
  EXPECT_EQ(parked->job().id(), fits.id());
  EXPECT_EQ(StateOf(big.id()), JobState::JOB_STATE_QUEUED);
}

// A worker that measured nothing (--skip-throughput-probe) announces no memory: it may take any job.
TEST_F(LeaseMemoryTest, AWorkerThatAnnouncedNoMemoryTakesAnyJob) {
  Job big = Submit(500 * kGiB);
  Register("unmeasured", 0);
  std::optional<LeaseResponse> leased = LeaseNow("unmeasured");
  ASSERT_TRUE(leased.has_value());
  EXPECT_EQ(leased->job().id(), big.id());
  EXPECT_EQ(Skips("host"), 0);
}

// A GPU job's GPU memory need is matched against the worker's GPU memory; its host need against host memory.
TEST_F(LeaseMemoryTest, AGpuJobGoesToAWorkerWithTheGpuMemory) {
  Job gpu_job = Submit(4 * kGiB, /*gpus=*/1, /*gpu_need=*/40 * kGiB);
  Register("gpu-24", 64 * kGiB, 1, 24 * kGiB, {"cpu", "cuda:0"});
  EXPECT_FALSE(LeaseNow("gpu-24").has_value());
  EXPECT_EQ(Skips("gpu"), 1);
  Register("gpu-80-small-host", 2 * kGiB, 1, 80 * kGiB, {"cuda:0"});
  EXPECT_FALSE(LeaseNow("gpu-80-small-host").has_value()) << "4 GiB host memory needed, 2 GiB announced";
  EXPECT_EQ(Skips("host"), 1);
  Register("gpu-80", 64 * kGiB, 1, 80 * kGiB, {"cpu", "cuda:0"});
  std::optional<LeaseResponse> leased = LeaseNow("gpu-80");
  ASSERT_TRUE(leased.has_value());
  EXPECT_EQ(leased->job().id(), gpu_job.id());
}

// A job's recorded need survives a restart (the queue is rebuilt from the store).
TEST_F(LeaseMemoryTest, TheRecordedNeedSurvivesARestart) {
  Job big = Submit(60 * kGiB);
  Open();
  Register("small", 24 * kGiB);
  EXPECT_FALSE(LeaseNow("small").has_value());
  Register("big", 64 * kGiB);
  std::optional<LeaseResponse> leased = LeaseNow("big");
  ASSERT_TRUE(leased.has_value());
  EXPECT_EQ(leased->job().id(), big.id());
}

int64_t ColumnOf(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  int64_t value = -1;
  if (sqlite3_step(stmt) == SQLITE_ROW) value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

// A store file written by the previous schema (version 3: no gpus / memory columns) is migrated on open; the job
// it holds reads 0 (unknown) and stays leasable by any worker, and new jobs record their needs in the new columns.
TEST_F(LeaseMemoryTest, JobsOfAStoreFromThePreviousSchemaStayLeasable) {
  Job old = Submit(0);
  Close();
  // Back to version 3 as a quarkd of that schema left it.
  const std::string path = dir_.File("q.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(db,
                         "ALTER TABLE jobs DROP COLUMN gpus; ALTER TABLE jobs DROP COLUMN host_memory_bytes; "
                         "ALTER TABLE jobs DROP COLUMN gpu_memory_bytes; DELETE FROM schema_version WHERE version >= 4",
                         nullptr, nullptr, &error),
            SQLITE_OK)
      << (error != nullptr ? error : "");
  sqlite3_close(db);
  ASSERT_EQ(ColumnOf(path, "SELECT MAX(version) FROM schema_version"), 3);

  Open();
  EXPECT_EQ(ColumnOf(path, "SELECT MAX(version) FROM schema_version"), kJobStoreSchemaVersion);
  EXPECT_EQ(ColumnOf(path, "SELECT host_memory_bytes FROM jobs WHERE id = '" + old.id() + "'"), 0);
  Job big = Submit(60 * kGiB, 1, 30 * kGiB);
  EXPECT_EQ(ColumnOf(path, "SELECT host_memory_bytes FROM jobs WHERE id = '" + big.id() + "'"), 60 * kGiB);
  EXPECT_EQ(ColumnOf(path, "SELECT gpu_memory_bytes FROM jobs WHERE id = '" + big.id() + "'"), 30 * kGiB);
  EXPECT_EQ(ColumnOf(path, "SELECT gpus FROM jobs WHERE id = '" + big.id() + "'"), 1);
  Register("tiny", 1 * kGiB);
  std::optional<LeaseResponse> leased = LeaseNow("tiny");
  ASSERT_TRUE(leased.has_value());
  EXPECT_EQ(leased->job().id(), old.id());
}

}  // namespace
}  // namespace quark::server
