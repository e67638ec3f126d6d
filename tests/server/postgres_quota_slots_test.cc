// #29 storage quota on PostgreSQL under replicas (migration 8): a tenant's counter is split into slots, one per
// backend, so that replicas writing one tenant's jobs do not commit one at a time behind one row lock. Two stores
// (two replicas' connection pools) write, finish and delete one tenant's jobs from eight threads: the tenant's bytes
// stay exactly the sum of its rows, and the writes landed in several slots (some negative: a job deleted through
// another connection than the one that stored it).
#include <gtest/gtest.h>

#include <thread>

#include "server/store/pg_util.h"
#include "server/store/postgres_job_store.h"
#include "tests/server/postgres_fixture.h"
#include "tests/server/storage_quota_store_checks.h"
#include "tests/support/require_peer.h"

namespace quark::server {
namespace {

using testing::TestPostgres;

int64_t QueryInt(PGconn* conn, const std::string& sql) {
  absl::StatusOr<PgResult> result = PgExec(conn, sql);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->Int(0, 0) : -1;
}

TEST(PostgresQuotaSlotsTest, ReplicasWritingOneTenantKeepItsBytesExactAcrossSlots) {
  if (TestPostgres::BinDir().empty()) QUARK_PEER_MISSING() << "PostgreSQL is not installed (scripts/install-deps.sh)";
  TestPostgres pg;
  ASSERT_EQ(pg.Start(), "");
  std::unique_ptr<PostgresJobStore> stores[2];
  for (auto& store : stores) {
    auto opened = PostgresJobStore::Open(pg.Dsn());
    ASSERT_TRUE(opened.ok()) << opened.status();
    store = std::move(*opened);
  }
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const std::string id = "job-" + std::to_string(t) + "-" + std::to_string(i);
        testing::CreateAndFinish(*stores[t % 2], id, "t", 100 + i, quark::v1::JOB_STATE_SUCCEEDED);
        if (i % 3 == 0) EXPECT_TRUE(stores[(t + 1) % 2]->DeleteJob(id).ok()) << id;  // the other replica deletes
      }
    });
  }
  for (std::thread& writer : writers) writer.join();

  absl::StatusOr<PgConn> conn = ConnectPg(pg.Dsn());
  ASSERT_TRUE(conn.ok()) << conn.status();
  const int64_t rows = QueryInt(conn->get(),
                                "SELECT ((SELECT COALESCE(SUM(octet_length(job)), 0) FROM jobs WHERE tenant = 't') + "
                                "(SELECT COALESCE(SUM(octet_length(e.event)), 0) FROM job_events e JOIN jobs j "
                                "ON e.job_id = j.id WHERE j.tenant = 't'))::BIGINT");
  EXPECT_GT(rows, 0);
  EXPECT_EQ(*stores[0]->TenantStoredBytes("t"), rows);
  EXPECT_EQ(*stores[1]->TenantStoredBytes("t"), rows);
  EXPECT_GT(QueryInt(conn->get(), "SELECT COUNT(*) FROM tenant_storage_slots WHERE tenant = 't'"), 1);
  EXPECT_EQ(*stores[0]->TenantStoredBytes("nobody"), 0);
}

}  // namespace
}  // namespace quark::server
