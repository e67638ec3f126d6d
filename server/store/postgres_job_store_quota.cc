// PostgresJobStore's storage-quota side (#29): the bytes a tenant's rows hold and the deletion of finished jobs; and
// the content key a job with changed files loses (verified dedup).
// A tenant's bytes are kept in tenant_storage_slots by triggers (migrations 6-8: one slot row per backend, so that
// replicas writing one tenant's jobs do not queue on one row lock); octet_length() of a BYTEA reads the TOAST header
// only.
#include "absl/strings/str_cat.h"
#include "server/store/postgres_job_store.h"
#include "server/store/postgres_schema.h"

namespace quark::server {

absl::StatusOr<int64_t> PostgresJobStore::TenantStoredBytes(const std::string& tenant) {
  int64_t bytes = 0;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result =
        PgExec(conn, "SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM tenant_storage_slots WHERE tenant = $1",
               PgParams().Add(tenant));  // kept by triggers (migrations 6-8), one slot per backend
    if (!result.ok()) return result.status();
    bytes = result->Int(0, 0);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return bytes;
}

absl::StatusOr<int64_t> PostgresJobStore::DeleteJob(const std::string& id) {
  int64_t bytes = 0;
  absl::Status status = InTransaction([&](PGconn* conn) -> absl::Status {
    // The row lock holds off a replica's concurrent update (a state change) until the delete commits.
    absl::StatusOr<PgResult> row = PgExec(conn, "SELECT state FROM jobs WHERE id = $1 FOR UPDATE", PgParams().Add(id));
    if (!row.ok()) return row.status();
    if (row->rows() == 0) return JobNotFoundError(id);
    const auto state = static_cast<quark::v1::JobState>(row->Int(0, 0));
    if (!IsDeletableState(state)) return JobNotDeletableError(id, state);
    absl::StatusOr<PgResult> sized =
        PgExec(conn,
               absl::StrCat("SELECT (SELECT COALESCE(SUM(octet_length(job)), 0) FROM jobs WHERE id = $1)::BIGINT + "
                            "(SELECT COALESCE(SUM(octet_length(event)), 0) FROM job_events WHERE job_id = $1)::BIGINT + "
                            "(SELECT COALESCE(SUM(",
                            PgAttemptBytes("a"), "), 0) FROM job_attempts a WHERE a.job_id = $1)::BIGINT"),
               PgParams().Add(id));
    if (!sized.ok()) return sized.status();
    bytes = sized->Int(0, 0);
    for (const char* sql : {"DELETE FROM job_events WHERE job_id = $1", "DELETE FROM job_attempts WHERE job_id = $1",
                            "DELETE FROM jobs WHERE id = $1"}) {
      absl::StatusOr<PgResult> removed = PgExec(conn, sql, PgParams().Add(id));
      if (!removed.ok()) return removed.status();
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return bytes;
}

absl::StatusOr<std::vector<StoredJob>> PostgresJobStore::ListFinishedJobs(absl::Time created_before,
                                                                          int64_t after_order, int limit) {
  static const std::string sql = FinishedJobsSql("$1", "$2", "$3");
  return ScanJobs(sql, absl::ToUnixMillis(created_before), after_order, limit);
}

absl::StatusOr<std::vector<StoredJob>> PostgresJobStore::ListExcessFinishedJobs(int keep, int64_t after_order,
                                                                                int limit) {
  static const std::string sql = ExcessFinishedJobsSql("$1", "$2", "$3");
  return ScanJobs(sql, keep, after_order, limit);
}

absl::StatusOr<std::vector<StoredJob>> PostgresJobStore::ScanJobs(const std::string& sql, int64_t a, int64_t b,
                                                                  int64_t c) {
  std::vector<StoredJob> jobs;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result = PgExec(conn, sql, PgParams().Add(a).Add(b).Add(c));
    if (!result.ok()) return result.status();
    for (int i = 0; i < result->rows(); ++i) {
      StoredJob stored{result->Int(i, 0), {}};
      if (!stored.job.ParseFromString(result->Bytes(i, 1))) {
        return absl::DataLossError(absl::StrCat("job store: unreadable job row seq ", stored.order));
      }
      jobs.push_back(std::move(stored));
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return jobs;
}

absl::Status PostgresJobStore::ForgetContentKey(const std::string& id) {
  return WithConnection([&](PGconn* conn) -> absl::Status {
    return PgExec(conn, "UPDATE jobs SET content_key = '' WHERE id = $1", PgParams().Add(id)).status();
  });
}

}  // namespace quark::server
