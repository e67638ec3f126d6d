#include "server/store/sqlite_job_store.h"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "server/store/audit_retention.h"
#include "tests/server/storage_quota_store_checks.h"
#include "tests/server/test_util.h"

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;
using testing::TempDir;

Job MakeJob(const std::string& id, const std::string& request_id = "", int priority = 0) {
  Job job;
  job.set_id(id);
  job.set_request_id(request_id);
  job.set_state(JobState::JOB_STATE_QUEUED);
  job.mutable_spec()->set_model_uri("file:///models/m");
  job.mutable_spec()->set_preset("w_int8_a_int8_per_tensor_sym");
  job.mutable_spec()->set_priority(priority);
  job.mutable_created_at()->set_seconds(1700000000);
  return job;
}

std::vector<JobEvent> StateEvents(JobState state) {
  JobEvent event;
  event.set_state(state);
  return {event};
}

std::unique_ptr<SqliteJobStore> OpenOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

TEST(SqliteJobStoreTest, CreatesAndReadsJobsWithTheirFirstEvent) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("q.db"));
  std::vector<JobEvent> events = StateEvents(JobState::JOB_STATE_QUEUED);
  bool created = false;
  absl::StatusOr<StoredJob> stored = store->CreateJob(MakeJob("job-1"), &events, &created);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(created);
  EXPECT_EQ(events[0].sequence(), 1);
  EXPECT_EQ(events[0].job_id(), "job-1");
  absl::StatusOr<Job> job = store->GetJob("job-1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->spec().model_uri(), "file:///models/m");
  absl::StatusOr<Job> missing = store->GetJob("job-404");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("job-404"), std::string::npos);
}

TEST(SqliteJobStoreTest, RepeatedRequestIdReturnsTheFirstJob) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("q.db"));
  bool created = false;
  std::vector<JobEvent> events = StateEvents(JobState::JOB_STATE_QUEUED);
  ASSERT_TRUE(store->CreateJob(MakeJob("job-1", "req-a"), &events, &created).ok());
  events = StateEvents(JobState::JOB_STATE_QUEUED);
  absl::StatusOr<StoredJob> again = store->CreateJob(MakeJob("job-2", "req-a"), &events, &created);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(again->job.id(), "job-1");
  EXPECT_EQ(store->GetJob("job-2").status().code(), absl::StatusCode::kNotFound);
  // Jobs without a request id never collide.
  events = StateEvents(JobState::JOB_STATE_QUEUED);
  ASSERT_TRUE(store->CreateJob(MakeJob("job-3"), &events, &created).ok());
  events = StateEvents(JobState::JOB_STATE_QUEUED);
  ASSERT_TRUE(store->CreateJob(MakeJob("job-4"), &events, &created).ok());
  EXPECT_TRUE(created);
}

TEST(SqliteJobStoreTest, UpdatesAppendEventsInSequenceAndAttempts) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("q.db"));
  bool created = false;
  std::vector<JobEvent> events = StateEvents(JobState::JOB_STATE_QUEUED);
  ASSERT_TRUE(store->CreateJob(MakeJob("job-1"), &events, &created).ok());
  Job job = MakeJob("job-1");
  job.set_state(JobState::JOB_STATE_RUNNING);
  quark::v1::Attempt* attempt = job.add_attempts();
  attempt->set_number(1);
  attempt->set_worker_id("w");
  events = StateEvents(JobState::JOB_STATE_RUNNING);
  JobEvent log;
  log.set_log("hello");
  events.push_back(log);
  ASSERT_TRUE(store->UpdateJob(job, &events).ok());
  EXPECT_EQ(events[0].sequence(), 2);
  EXPECT_EQ(events[1].sequence(), 3);
  absl::StatusOr<std::vector<JobEvent>> after1 = store->ListEvents("job-1", 1, 100);
  ASSERT_TRUE(after1.ok());
  ASSERT_EQ(after1->size(), 2u);
  EXPECT_EQ((*after1)[1].log(), "hello");
  EXPECT_EQ(store->GetJob("job-1")->attempts_size(), 1);
  events.clear();
  EXPECT_EQ(store->UpdateJob(MakeJob("job-404"), &events).code(), absl::StatusCode::kNotFound);
}

TEST(SqliteJobStoreTest, ListsNewestFirstWithFiltersAndPages) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("q.db"));
  bool created = false;
  for (int i = 0; i < 7; ++i) {
    Job job = MakeJob("job-" + std::to_string(i));
    if (i % 2 == 0) (*job.mutable_spec()->mutable_labels())["team"] = "a";
    std::vector<JobEvent> events;
    ASSERT_TRUE(store->CreateJob(job, &events, &created).ok());
  }
  JobFilter filter;
  filter.labels["team"] = "a";  // jobs 6, 4, 2, 0
  absl::StatusOr<JobPage> first = store->ListJobs(filter, 3, "");
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->jobs.size(), 3u);
  EXPECT_EQ(first->jobs[0].id(), "job-6");
  EXPECT_EQ(first->jobs[2].id(), "job-2");
  ASSERT_FALSE(first->next_page_token.empty());
  absl::StatusOr<JobPage> second = store->ListJobs(filter, 3, first->next_page_token);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->jobs.size(), 1u);
  EXPECT_EQ(second->jobs[0].id(), "job-0");
  EXPECT_TRUE(second->next_page_token.empty());
  filter.labels.clear();
  filter.states = {JobState::JOB_STATE_RUNNING};
  EXPECT_TRUE(store->ListJobs(filter, 10, "")->jobs.empty());
  EXPECT_EQ(store->ListJobs(filter, 10, "nonsense").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SqliteJobStoreTest, SurvivesAnUncleanCloseOfTheWritingProcess) {
  TempDir dir;
  std::string path = dir.File("q.db");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A writer that dies without closing anything, like kill -9: the WAL must carry its commits.
    auto store = SqliteJobStore::Open(path);
    if (!store.ok()) _exit(1);
    bool created = false;
    for (int i = 0; i < 5; ++i) {
      std::vector<JobEvent> events = StateEvents(JobState::JOB_STATE_QUEUED);
      if (!(*store)->CreateJob(MakeJob("job-" + std::to_string(i)), &events, &created).ok()) _exit(2);
    }
    Job running = MakeJob("job-0");
    running.set_state(JobState::JOB_STATE_RUNNING);
    std::vector<JobEvent> events = StateEvents(JobState::JOB_STATE_RUNNING);
    if (!(*store)->UpdateJob(running, &events).ok()) _exit(3);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto store = OpenOrDie(path);
  absl::StatusOr<std::vector<StoredJob>> jobs =
      store->LoadJobs({JobState::JOB_STATE_QUEUED, JobState::JOB_STATE_RUNNING});
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 5u);
  EXPECT_EQ((*jobs)[0].job.id(), "job-0");
  EXPECT_EQ((*jobs)[0].job.state(), JobState::JOB_STATE_RUNNING);
  EXPECT_LT((*jobs)[0].order, (*jobs)[1].order);
  EXPECT_EQ(store->ListEvents("job-0", 0, 10)->size(), 2u);
  auto counts = store->CountJobs();
  ASSERT_TRUE(counts.ok());
  std::pair<JobState, std::string> key{JobState::JOB_STATE_QUEUED, "w_int8_a_int8_per_tensor_sym"};
  EXPECT_EQ((*counts)[key], 4);
}

TEST(SqliteJobStoreTest, FindsByContentKeySucceededFirstAndNeverAcrossTenants) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("q.db"));
  auto create = [&](const std::string& id, const std::string& tenant, const std::string& key, JobState state) {
    Job job = MakeJob(id);
    job.set_tenant(tenant);
    job.set_content_key(key);
    job.set_state(state);
    std::vector<JobEvent> events = StateEvents(state);
    bool created = false;
    ASSERT_TRUE(store->CreateJob(job, &events, &created).ok());
  };
  create("job-a-failed", "a", "k1", JobState::JOB_STATE_FAILED);
  EXPECT_EQ(store->FindByContentKey("a", "k1").status().code(), absl::StatusCode::kNotFound);
  create("job-a-done", "a", "k1", JobState::JOB_STATE_SUCCEEDED);
  create("job-a-running", "a", "k1", JobState::JOB_STATE_RUNNING);
  create("job-a-cancelled", "a", "k1", JobState::JOB_STATE_CANCELLED);
  create("job-b-queued", "b", "k2", JobState::JOB_STATE_QUEUED);
  absl::StatusOr<Job> found = store->FindByContentKey("a", "k1");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->id(), "job-a-done") << "a succeeded job beats a newer running one";
  EXPECT_EQ(found->content_key(), "k1");
  EXPECT_EQ(store->FindByContentKey("b", "k1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->FindByContentKey("a", "k2").status().code(), absl::StatusCode::kNotFound);
  found = store->FindByContentKey("b", "k2");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->id(), "job-b-queued");
}

TEST(SqliteJobStoreTest, RefusesAStoreFromANewerSchema) {
  TempDir dir;
  std::string path = dir.File("q.db");
  { OpenOrDie(path); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO schema_version (version) VALUES (99)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("99"), std::string::npos);
}

// #29: the audit log is bounded (audit_retention.h). A million records written straight into the table stand for
// a flood of refused calls; each append then expires the oldest, and the newest kAuditLogMaxRecords stay append-only.
TEST(SqliteJobStoreTest, AuditLogKeepsItsNewestRecordsAndOnlyThoseAreAppendOnly) {
  TempDir dir;
  std::unique_ptr<SqliteJobStore> store = OpenOrDie(dir.File("q.db"));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("q.db").c_str(), &db), SQLITE_OK);
  auto exec = [&](const std::string& sql) {
    char* error = nullptr;
    const bool ok = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) == SQLITE_OK;
    sqlite3_free(error);
    return ok;
  };
  ASSERT_TRUE(exec(absl::StrCat("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ",
                                kAuditLogMaxRecords, ") INSERT INTO audit_log (time_unix_ms, tenant, record) ",
                                "SELECT 0, 'old', x'' FROM n")));
  for (int64_t expected_first : {2, 3}) {
    quark::v1::AuditRecord record;
    record.set_tenant("t");
    record.set_action("submit");
    ASSERT_TRUE(store->AppendAudit(&record).ok());
    EXPECT_EQ(record.sequence(), kAuditLogMaxRecords + expected_first - 1);
    absl::StatusOr<std::vector<quark::v1::AuditRecord>> first = store->ListAudit(0, 1, "");
    ASSERT_TRUE(first.ok() && first->size() == 1u);
    EXPECT_EQ((*first)[0].sequence(), expected_first) << "the oldest records expire, one per append";
  }
  // Every kept record, the oldest included, is still append-only.
  EXPECT_FALSE(exec("DELETE FROM audit_log WHERE sequence = 3"));
  EXPECT_FALSE(exec(absl::StrCat("DELETE FROM audit_log WHERE sequence = ", kAuditLogMaxRecords + 2)));
  EXPECT_FALSE(exec("UPDATE audit_log SET tenant = 'x' WHERE sequence = 3"));
  sqlite3_stmt* count = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM audit_log", -1, &count, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(count), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(count, 0), kAuditLogMaxRecords);
  sqlite3_finalize(count);
  sqlite3_close(db);
}

TEST(SqliteJobStoreTest, AuditLogIsAppendOnlyAndRequestIdsArePerTenant) {
  TempDir dir;
  std::unique_ptr<SqliteJobStore> store = OpenOrDie(dir.File("q.db"));
  for (const char* tenant : {"a", "b", "a"}) {
    quark::v1::AuditRecord record;
    record.set_tenant(tenant);
    record.set_action("submit");
    record.mutable_time()->set_seconds(1700000000);
    ASSERT_TRUE(store->AppendAudit(&record).ok());
    EXPECT_GT(record.sequence(), 0);
  }
  absl::StatusOr<std::vector<quark::v1::AuditRecord>> all = store->ListAudit(0, 10, "");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(store->ListAudit(0, 10, "a")->size(), 2u);
  EXPECT_EQ(store->ListAudit((*all)[1].sequence(), 10, "")->size(), 1u);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("q.db").c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_NE(sqlite3_exec(db, "UPDATE audit_log SET tenant = 'x'", nullptr, nullptr, &error), SQLITE_OK);
  sqlite3_free(error);
  EXPECT_NE(sqlite3_exec(db, "DELETE FROM audit_log", nullptr, nullptr, &error), SQLITE_OK);
  sqlite3_free(error);
  sqlite3_close(db);
  EXPECT_EQ(store->ListAudit(0, 10, "")->size(), 3u);

  // The same request id in two tenants makes two jobs; each tenant finds only its own.
  Job a = MakeJob("job-a", "same");
  a.set_tenant("a");
  Job b = MakeJob("job-b", "same");
  b.set_tenant("b");
  bool created = false;
  ASSERT_TRUE(store->CreateJob(a, nullptr, &created).ok());
  EXPECT_TRUE(created);
  ASSERT_TRUE(store->CreateJob(b, nullptr, &created).ok());
  EXPECT_TRUE(created);
  EXPECT_EQ(store->FindByRequestId("b", "same")->job.id(), "job-b");
  EXPECT_EQ(store->FindByRequestId("c", "same").status().code(), absl::StatusCode::kNotFound);
  JobFilter filter;
  filter.tenant = "a";
  absl::StatusOr<JobPage> page = store->ListJobs(filter, 10, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 1u);
  EXPECT_EQ(page->jobs[0].id(), "job-a");
}

// #29 storage quota: the bytes a tenant's jobs hold (finished and cancelled ones included) and DeleteJob.
TEST(SqliteJobStoreTest, TenantStoredBytesCountEveryStateAndDeleteJobFreesThem) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("q.db"));
  testing::ExpectStoredBytesAndDeletion(*store);
  // The deletion is durable: a reopened store sees it.
  store.reset();
  store = OpenOrDie(dir.File("q.db"));
  EXPECT_EQ(store->GetJob("job-a2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store->GetJob("job-a3").ok());
}

TEST(SqliteJobStoreTest, AttemptRowsCountInTheTenantsStoredBytes) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("q.db"));
  testing::ExpectAttemptRowsCount(*store);
}

// Schema 6 seeds tenant_storage from the rows a store of schema 5 already holds.
TEST(SqliteJobStoreTest, TheUpgradeToSchema6CountsTheRowsAlreadyStored) {
  TempDir dir;
  const std::string path = dir.File("q.db");
  auto store = OpenOrDie(path);
  const int64_t a = testing::CreateAndFinish(*store, "job-a1", "a", 3000, quark::v1::JOB_STATE_CANCELLED);
  const int64_t b = testing::CreateAndFinish(*store, "job-b1", "b", 500, quark::v1::JOB_STATE_SUCCEEDED);
  store.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "DROP TABLE tenant_storage; DROP TRIGGER jobs_bytes_insert; DROP TRIGGER jobs_bytes_update; "
                         "DROP TRIGGER jobs_bytes_delete; DROP TRIGGER job_events_bytes_insert; "
                         "DROP TRIGGER job_events_bytes_delete; DELETE FROM schema_version WHERE version >= 6",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  store = OpenOrDie(path);
  EXPECT_EQ(*store->TenantStoredBytes("a"), a);
  EXPECT_EQ(*store->TenantStoredBytes("b"), b);
  EXPECT_EQ(*store->TenantStoredBytes("c"), 0);
}

// A store written before schema 7 holds attempt rows its counter never saw: the upgrade counts them.
TEST(SqliteJobStoreTest, TheUpgradeToSchema7CountsTheAttemptRowsAlreadyStored) {
  TempDir dir;
  const std::string path = dir.File("q.db");
  auto store = OpenOrDie(path);
  const int64_t a = testing::CreateAndFinish(*store, "job-a1", "a", 3000, quark::v1::JOB_STATE_CANCELLED);
  Job job = *store->GetJob("job-a1");
  const int64_t old_row = static_cast<int64_t>(job.SerializeAsString().size());
  quark::v1::Attempt* attempt = job.add_attempts();
  attempt->set_number(1);
  attempt->set_worker_id("local-0-0123456789abcdef");
  attempt->set_error("worker lost");
  std::vector<JobEvent> none;
  ASSERT_TRUE(store->UpdateJob(job, &none).ok());
  const int64_t with_attempt = *store->TenantStoredBytes("a");
  const int64_t attempt_bytes = static_cast<int64_t>(std::string("job-a1").size() + attempt->worker_id().size() +
                                                     attempt->error().size() + 24);
  EXPECT_EQ(with_attempt, a - old_row + static_cast<int64_t>(job.SerializeAsString().size()) + attempt_bytes);
  store.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  // Schema 6 as it was: the attempt triggers absent and the counter without the attempt.
  ASSERT_EQ(sqlite3_exec(db,
                         absl::StrCat("DROP TRIGGER job_attempts_bytes_insert; DROP TRIGGER job_attempts_bytes_update; "
                                      "DROP TRIGGER job_attempts_bytes_delete; UPDATE tenant_storage SET bytes = ",
                                      with_attempt - attempt_bytes,
                                      " WHERE tenant = 'a'; DELETE FROM schema_version WHERE version >= 7")
                             .c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  store = OpenOrDie(path);
  EXPECT_EQ(*store->TenantStoredBytes("a"), with_attempt);
  absl::StatusOr<int64_t> freed = store->DeleteJob("job-a1");
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*freed, with_attempt);
  EXPECT_EQ(*store->TenantStoredBytes("a"), 0);
}

}  // namespace
}  // namespace quark::server
