// SqliteJobStore's storage-quota side (#29): the bytes a tenant's rows hold and the deletion of finished jobs; and
// the content key a job with changed files loses (verified dedup).
// A tenant's bytes are kept in tenant_storage by triggers (schema 6); length() of a BLOB reads the record header only.
#include "absl/strings/str_cat.h"
#include "server/store/job_store_schema.h"
#include "server/store/sqlite_job_store.h"

namespace quark::server {
namespace {

// Bound by the job's id (?1): the job row's bytes plus its events' and attempts'.
const std::string& JobBytesSql() {
  static const std::string sql = absl::StrCat(
      "SELECT (SELECT COALESCE(SUM(length(job)), 0) FROM jobs WHERE id = ?1) + "
      "(SELECT COALESCE(SUM(length(event)), 0) FROM job_events WHERE job_id = ?1) + "
      "(SELECT COALESCE(SUM(", SqliteAttemptBytes("a"), "), 0) FROM job_attempts a WHERE a.job_id = ?1)");
  return sql;
}

absl::StatusOr<int64_t> QueryInt(sqlite3* db, const char* sql, const std::string& argument) {
  absl::StatusOr<Statement> query = Prepare(db, sql);
  if (!query.ok()) return query.status();
  query->Bind(1, argument);
  absl::StatusOr<bool> row = query->Step();
  if (!row.ok()) return row.status();
  return *row && !query->ColumnIsNull(0) ? query->ColumnInt(0) : 0;
}

// Runs a `SELECT seq, job` with three integer parameters (retention's candidate lists).
absl::StatusOr<std::vector<StoredJob>> ScanJobs(sqlite3* db, const std::string& sql, int64_t a, int64_t b, int64_t c) {
  absl::StatusOr<Statement> scan = Prepare(db, sql);
  if (!scan.ok()) return scan.status();
  scan->Bind(1, a).Bind(2, b).Bind(3, c);
  std::vector<StoredJob> jobs;
  while (true) {
    absl::StatusOr<bool> row = scan->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    StoredJob stored{scan->ColumnInt(0), {}};
    if (!stored.job.ParseFromString(scan->ColumnBlob(1))) {
      return absl::DataLossError(absl::StrCat("job store: unreadable job row seq ", stored.order));
    }
    jobs.push_back(std::move(stored));
  }
  return jobs;
}

}  // namespace

absl::StatusOr<int64_t> SqliteJobStore::TenantStoredBytes(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  // tenant_storage is kept by triggers (schema 6).
  return QueryInt(db_.get(), "SELECT COALESCE((SELECT bytes FROM tenant_storage WHERE tenant = ?1), 0)", tenant);
}

absl::StatusOr<int64_t> SqliteJobStore::DeleteJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_.get());
  absl::Status status = txn.Begin();
  if (!status.ok()) return status;
  absl::StatusOr<quark::v1::Job> job = GetJobLocked(id);
  if (!job.ok()) return job.status();
  if (!IsDeletableState(job->state())) return JobNotDeletableError(id, job->state());
  absl::StatusOr<int64_t> bytes = QueryInt(db_.get(), JobBytesSql().c_str(), id);
  if (!bytes.ok()) return bytes.status();
  for (const char* sql : {"DELETE FROM job_events WHERE job_id = ?", "DELETE FROM job_attempts WHERE job_id = ?",
                          "DELETE FROM jobs WHERE id = ?"}) {
    absl::StatusOr<Statement> remove = Prepare(db_.get(), sql);
    if (!remove.ok()) return remove.status();
    remove->Bind(1, id);
    status = remove->Run();
    if (!status.ok()) return status;
  }
  status = txn.Commit();
  if (!status.ok()) return status;
  return *bytes;
}

absl::StatusOr<std::vector<StoredJob>> SqliteJobStore::ListFinishedJobs(absl::Time created_before,
                                                                        int64_t after_order, int limit) {
  absl::MutexLock lock(&mu_);
  return ScanJobs(db_.get(), FinishedJobsSql("?1", "?2", "?3"), absl::ToUnixMillis(created_before), after_order, limit);
}

absl::StatusOr<std::vector<StoredJob>> SqliteJobStore::ListExcessFinishedJobs(int keep, int64_t after_order,
                                                                              int limit) {
  absl::MutexLock lock(&mu_);
  return ScanJobs(db_.get(), ExcessFinishedJobsSql("?1", "?2", "?3"), keep, after_order, limit);
}

absl::Status SqliteJobStore::ForgetContentKey(const std::string& id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Statement> update = Prepare(db_.get(), "UPDATE jobs SET content_key = '' WHERE id = ?");
  if (!update.ok()) return update.status();
  update->Bind(1, id);
  return update->Run();
}

}  // namespace quark::server
