#include "server/store/job_store_schema.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/audit_retention.h"
#include "server/store/job_store.h"
#include "server/store/sqlite_util.h"

namespace quark::server {

std::string SqliteAttemptBytes(const std::string& row) {
  return absl::StrCat("(length(CAST(", row, ".job_id AS BLOB)) + length(CAST(", row, ".worker_id AS BLOB)) + ",
                      "length(CAST(", row, ".error AS BLOB)) + ", kAttemptRowFixedBytes, ")");
}

namespace {

// Index i holds the migration from version i to i + 1. Never edit a shipped entry: add one.
const std::vector<std::string>& Migrations() {
  static const std::vector<std::string> migrations = {
      R"sql(
      CREATE TABLE jobs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        request_id TEXT UNIQUE,
        state INTEGER NOT NULL,
        priority INTEGER NOT NULL,
        preset TEXT NOT NULL,
        created_unix_ms INTEGER NOT NULL,
        job BLOB NOT NULL);
      CREATE INDEX jobs_by_state ON jobs (state, seq);
      CREATE TABLE job_events (
        job_id TEXT NOT NULL REFERENCES jobs (id),
        sequence INTEGER NOT NULL,
        event BLOB NOT NULL,
        PRIMARY KEY (job_id, sequence)) WITHOUT ROWID;
      CREATE TABLE job_attempts (
        job_id TEXT NOT NULL REFERENCES jobs (id),
        number INTEGER NOT NULL,
        worker_id TEXT NOT NULL,
        started_unix_ms INTEGER NOT NULL,
        ended_unix_ms INTEGER,
        error TEXT NOT NULL,
        PRIMARY KEY (job_id, number)) WITHOUT ROWID;
      )sql",
      // 2: tenants (a job's owner; request ids are unique per tenant, see ScopedRequestId) and the audit log,
      // append-only: triggers refuse every UPDATE and DELETE.
      R"sql(
      ALTER TABLE jobs ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
      CREATE INDEX jobs_by_tenant ON jobs (tenant, seq);
      CREATE TABLE audit_log (
        sequence INTEGER PRIMARY KEY AUTOINCREMENT,
        time_unix_ms INTEGER NOT NULL,
        tenant TEXT NOT NULL,
        record BLOB NOT NULL);
      CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
        BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
      CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
        BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
      )sql",
      // 3: content keys (deduplication, #17): a submission finds the tenant's job with the same key.
      R"sql(
      ALTER TABLE jobs ADD COLUMN content_key TEXT NOT NULL DEFAULT '';
      CREATE INDEX jobs_by_content_key ON jobs (tenant, content_key, state, seq) WHERE content_key <> '';
      )sql",
      // 4: what a job needs of its worker (worker_fit.h): the GPUs it asks for and its estimated peak memory, as the
      // PostgreSQL store's claim filters on them. Jobs stored before read 0 (unknown): any worker may lease them.
      R"sql(
      ALTER TABLE jobs ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE jobs ADD COLUMN host_memory_bytes INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE jobs ADD COLUMN gpu_memory_bytes INTEGER NOT NULL DEFAULT 0;
      )sql",
      // 5 (#29): the audit log bounded (audit_retention.h): only records kAuditLogMaxRecords or more below the
      // newest may be deleted; the newest stay append-only.
      absl::StrCat(R"sql(
      DROP TRIGGER audit_log_no_delete;
      CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
        WHEN OLD.sequence > (SELECT MAX(sequence) FROM audit_log) - )sql",
                   kAuditLogMaxRecords, R"sql(
        BEGIN SELECT RAISE(ABORT, 'audit_log is append-only (records below the newest may only expire)'); END;
      )sql"),
      // 6 (#29 storage quota): the bytes each tenant's job rows and events hold, kept by triggers in the writing
      // transaction, so that the check at submit reads one row instead of summing the tenant's rows. Written to be
      // re-run over itself (the upgrade tests roll the version back without dropping objects).
      R"sql(
      CREATE TABLE IF NOT EXISTS tenant_storage (tenant TEXT PRIMARY KEY, bytes INTEGER NOT NULL) WITHOUT ROWID;
      DELETE FROM tenant_storage;
      INSERT INTO tenant_storage (tenant, bytes)
        SELECT tenant, SUM(b) FROM (SELECT tenant, length(job) AS b FROM jobs
                                    UNION ALL SELECT j.tenant, length(e.event) FROM job_events e
                                              JOIN jobs j ON e.job_id = j.id) GROUP BY tenant;
      CREATE TRIGGER IF NOT EXISTS jobs_bytes_insert AFTER INSERT ON jobs BEGIN
        INSERT INTO tenant_storage (tenant, bytes) VALUES (NEW.tenant, length(NEW.job))
          ON CONFLICT (tenant) DO UPDATE SET bytes = bytes + excluded.bytes;
      END;
      CREATE TRIGGER IF NOT EXISTS jobs_bytes_update AFTER UPDATE OF job ON jobs
        WHEN length(NEW.job) <> length(OLD.job) BEGIN
        UPDATE tenant_storage SET bytes = bytes + length(NEW.job) - length(OLD.job) WHERE tenant = NEW.tenant;
      END;
      CREATE TRIGGER IF NOT EXISTS jobs_bytes_delete AFTER DELETE ON jobs BEGIN
        UPDATE tenant_storage SET bytes = bytes - length(OLD.job) WHERE tenant = OLD.tenant;
      END;
      CREATE TRIGGER IF NOT EXISTS job_events_bytes_insert AFTER INSERT ON job_events BEGIN
        UPDATE tenant_storage SET bytes = bytes + length(NEW.event)
          WHERE tenant = (SELECT tenant FROM jobs WHERE id = NEW.job_id);
      END;
      CREATE TRIGGER IF NOT EXISTS job_events_bytes_delete AFTER DELETE ON job_events BEGIN
        UPDATE tenant_storage SET bytes = bytes - length(OLD.event)
          WHERE tenant = (SELECT tenant FROM jobs WHERE id = OLD.job_id);
      END;
      )sql",
      // 7 (#29 storage quota): attempt rows count too, each as its texts' bytes plus 8 for each of its three
      // integers (kAttemptRowBytes). Attempts are upserted (ON CONFLICT DO UPDATE, so that the UPDATE trigger fires:
      // INSERT OR REPLACE's delete fires no trigger). The counter is seeded again from all three tables; written to be
      // re-run over itself.
      R"sql(
      DELETE FROM tenant_storage;
      INSERT INTO tenant_storage (tenant, bytes)
        SELECT tenant, SUM(b) FROM (SELECT tenant, length(job) AS b FROM jobs
                                    UNION ALL SELECT j.tenant, length(e.event) FROM job_events e
                                              JOIN jobs j ON e.job_id = j.id
                                    UNION ALL SELECT j.tenant, )sql" + SqliteAttemptBytes("a") + R"sql( FROM job_attempts a
                                              JOIN jobs j ON a.job_id = j.id) GROUP BY tenant;
      CREATE TRIGGER IF NOT EXISTS job_attempts_bytes_insert AFTER INSERT ON job_attempts BEGIN
        UPDATE tenant_storage SET bytes = bytes + )sql" + SqliteAttemptBytes("NEW") + R"sql(
          WHERE tenant = (SELECT tenant FROM jobs WHERE id = NEW.job_id);
      END;
      CREATE TRIGGER IF NOT EXISTS job_attempts_bytes_update AFTER UPDATE ON job_attempts
        WHEN )sql" + SqliteAttemptBytes("NEW") + " <> " + SqliteAttemptBytes("OLD") + R"sql( BEGIN
        UPDATE tenant_storage SET bytes = bytes + )sql" + SqliteAttemptBytes("NEW") + " - " + SqliteAttemptBytes("OLD") + R"sql(
          WHERE tenant = (SELECT tenant FROM jobs WHERE id = NEW.job_id);
      END;
      CREATE TRIGGER IF NOT EXISTS job_attempts_bytes_delete AFTER DELETE ON job_attempts BEGIN
        UPDATE tenant_storage SET bytes = bytes - )sql" + SqliteAttemptBytes("OLD") + R"sql(
          WHERE tenant = (SELECT tenant FROM jobs WHERE id = OLD.job_id);
      END;
      )sql",
  };
  return migrations;
}

absl::StatusOr<int> CurrentVersion(sqlite3* db) {
  absl::Status status = Exec(db, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
  if (!status.ok()) return status;
  absl::StatusOr<Statement> select = Prepare(db, "SELECT MAX(version) FROM schema_version");
  if (!select.ok()) return select.status();
  absl::StatusOr<bool> row = select->Step();
  if (!row.ok()) return row.status();
  return *row && !select->ColumnIsNull(0) ? static_cast<int>(select->ColumnInt(0)) : 0;
}

}  // namespace

absl::Status MigrateJobStore(sqlite3* db) {
  absl::StatusOr<int> version = CurrentVersion(db);
  if (!version.ok()) return version.status();
  if (*version > kJobStoreSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("job store schema version ", *version,
                                                      " is newer than this quarkd's ", kJobStoreSchemaVersion));
  }
  for (int v = *version; v < kJobStoreSchemaVersion; ++v) {
    Transaction txn(db);
    absl::Status status = txn.Begin();
    if (status.ok()) status = Exec(db, Migrations()[v]);
    if (status.ok()) status = Exec(db, absl::StrCat("INSERT INTO schema_version (version) VALUES (", v + 1, ")"));
    if (status.ok()) status = txn.Commit();
    if (!status.ok()) return absl::InternalError(absl::StrCat("migration to schema ", v + 1, ": ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace quark::server
