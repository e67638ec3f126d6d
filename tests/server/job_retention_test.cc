// #29 retention of finished jobs (server/scheduler/job_retention.h): the sweep against SQLite and a real PostgreSQL
// on a manual clock (retention_store_checks.h), and quarkd --retain-finished-jobs-days deleting a store's old
// finished jobs at start, audited under its own principal.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "server/store/postgres_job_store.h"
#include "server/store/sqlite_job_store.h"
#include "tests/server/postgres_fixture.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/retention_store_checks.h"
#include "tests/server/security_fixture.h"
#include "tests/support/require_peer.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::TempDir;
using testing::TestPostgres;

TEST(SqliteRetentionTest, ASweepDeletesOnlyJobsFinishedBeforeTheAgeAsDeleteJobDoes) {
  TempDir dir;
  auto store = SqliteJobStore::Open(dir.File("quarkd.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  testing::ExpectRetentionDeletesOnlyOldFinishedJobs(**store);
}

TEST(SqliteRetentionTest, SweepsAtStartAndThenEveryIntervalOfTheClock) {
  TempDir dir;
  auto store = SqliteJobStore::Open(dir.File("quarkd.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  testing::ExpectSweepsAtStartAndEveryInterval(**store);
}

TEST(SqliteRetentionTest, EachTenantKeepsItsNewestFinishedJobs) {
  TempDir dir;
  auto store = SqliteJobStore::Open(dir.File("quarkd.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  testing::ExpectRetentionKeepsEachTenantsNewestFinishedJobs(**store);
}

class PostgresRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestPostgres::BinDir().empty()) QUARK_PEER_MISSING() << "PostgreSQL is not installed (scripts/install-deps.sh)";
    ASSERT_EQ(pg_.Start(), "");
    auto store = PostgresJobStore::Open(pg_.Dsn());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  TestPostgres pg_;
  std::unique_ptr<PostgresJobStore> store_;
};

TEST_F(PostgresRetentionTest, ASweepDeletesOnlyJobsFinishedBeforeTheAgeAsDeleteJobDoes) {
  testing::ExpectRetentionDeletesOnlyOldFinishedJobs(*store_);
}

TEST_F(PostgresRetentionTest, SweepsAtStartAndThenEveryIntervalOfTheClock) {
  testing::ExpectSweepsAtStartAndEveryInterval(*store_);
}

TEST_F(PostgresRetentionTest, EachTenantKeepsItsNewestFinishedJobs) {
  testing::ExpectRetentionKeepsEachTenantsNewestFinishedJobs(*store_);
}

TEST_F(PostgresRetentionTest, TwoReplicasSweepingTheSameJobsDeleteEachOnce) {
  auto other = PostgresJobStore::Open(pg_.Dsn());
  ASSERT_TRUE(other.ok()) << other.status();
  ManualClock clock(absl::FromUnixSeconds(1800000000));
  for (int i = 0; i < 40; ++i) {
    testing::StoreAgedJob(*store_, clock.Now(), "old-" + std::to_string(i), "a", pb::JOB_STATE_SUCCEEDED,
                          absl::Hours(100), absl::Hours(90));
  }
  RetentionPolicy policy;
  policy.max_age = absl::Hours(24);
  policy.page_size = 8;
  std::atomic<int> deleted{0};
  auto count = [&](const pb::Job&, int64_t, const std::string&) { ++deleted; };
  JobRetention first(store_.get(), &clock, policy, count);
  JobRetention second(other->get(), &clock, policy, count);
  std::thread racer([&] { EXPECT_TRUE(second.Sweep().ok()); });
  EXPECT_TRUE(first.Sweep().ok());
  racer.join();
  EXPECT_EQ(deleted.load(), 40);  // each deletion reported (and so audited) once
  EXPECT_EQ(*store_->TenantStoredBytes("a"), 0);
}

// The real quarkd over a store holding jobs that finished 10, 2 and 1 days ago and a queued job a month old: with
// --retain-finished-jobs-days 7 --retain-finished-jobs 1 the first (by age) and the second (by count) are gone right
// after start (no sleeping: the sweep runs at start), the others stay, and the audit log says who deleted them, why
// and what was freed.
TEST(RetentionProcessTest, QuarkdDeletesOldAndExcessFinishedJobsAtStartAndAuditsThem) {
  TempDir dir;
  std::filesystem::create_directories(dir.File("data"));
  std::filesystem::permissions(dir.File("data"), std::filesystem::perms::owner_all);
  {
    auto store = SqliteJobStore::Open(dir.File("data/quarkd.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    const absl::Time now = absl::Now();
    const absl::Duration day = absl::Hours(24);
    testing::StoreAgedJob(**store, now, "old-done", "", pb::JOB_STATE_SUCCEEDED, 11 * day, 10 * day);
    testing::StoreAgedJob(**store, now, "older-done", "", pb::JOB_STATE_CANCELLED, 3 * day, 2 * day);
    testing::StoreAgedJob(**store, now, "recent-done", "", pb::JOB_STATE_FAILED, 2 * day, 1 * day);
    testing::StoreAgedJob(**store, now, "month-queued", "", pb::JOB_STATE_QUEUED, 30 * day, 0 * day);
  }
  testing::QuarkdProcess quarkd;
  ASSERT_TRUE(quarkd.Start(QUARKD_BINARY,
                           {"--data-dir", dir.File("data"), "--listen", "127.0.0.1:0", "--metrics-listen", "",
                            "--workers", "0", "--retain-finished-jobs-days", "7", "--retain-finished-jobs", "1"},
                           dir.File("ready.json"), dir.File("quarkd.log")))
      << testing::ReadText(dir.File("quarkd.log"));
  auto channel = testing::MakeChannel(quarkd.address());
  auto api = pb::QuantizationService::NewStub(channel);
  auto admin = pb::AdminService::NewStub(channel);
  auto get = [&](const std::string& id) {
    pb::GetJobRequest request;
    request.set_id(id);
    pb::Job job;
    return api->GetJob(testing::Call().get(), request, &job).error_code();
  };
  EXPECT_TRUE(testing::WaitFor([&] { return get("old-done") == grpc::StatusCode::NOT_FOUND; }))
      << testing::ReadText(dir.File("quarkd.log"));
  EXPECT_TRUE(testing::WaitFor([&] { return get("older-done") == grpc::StatusCode::NOT_FOUND; }));
  EXPECT_EQ(get("recent-done"), grpc::StatusCode::OK);
  EXPECT_EQ(get("month-queued"), grpc::StatusCode::OK);

  pb::ListAuditRecordsResponse audit;
  ASSERT_TRUE(admin->ListAuditRecords(testing::Call().get(), pb::ListAuditRecordsRequest(), &audit).ok());
  std::map<std::string, std::string> deleted;  // target -> detail
  for (const pb::AuditRecord& record : audit.records()) {
    if (record.action() != "delete") continue;
    deleted[record.target()] = record.detail();
    EXPECT_EQ(record.principal(), "quarkd-retention");
    EXPECT_EQ(record.outcome(), "OK");
    EXPECT_NE(record.detail().find("freed_bytes="), std::string::npos) << record.detail();
  }
  ASSERT_EQ(deleted.size(), 2u);
  EXPECT_NE(deleted["old-done"].find("retention: finished"), std::string::npos) << deleted["old-done"];
  EXPECT_NE(deleted["older-done"].find("retention: more than 1 newer finished jobs"), std::string::npos)
      << deleted["older-done"];
}

}  // namespace
}  // namespace quark::server
