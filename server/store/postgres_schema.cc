// Versioned schema migrations of the PostgreSQL job store (shared by replicas: one migrates at a time).
#include "server/store/postgres_schema.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/audit_retention.h"
#include "server/store/job_store.h"

namespace quark::server {

std::string PgAttemptBytes(const std::string& row) {
  return absl::StrCat("(octet_length(", row, ".job_id) + octet_length(", row, ".worker_id) + octet_length(", row,
                      ".error) + ", kAttemptRowFixedBytes, ")::BIGINT");
}

namespace {

constexpr int64_t kMigrationLock = 0x717561726b64;  // "quarkd": one replica migrates at a time

// Index i holds the migration from version i to i + 1. Never edit a shipped entry: add one.
const std::vector<std::string>& PgMigrations() {
  static const std::vector<std::string> migrations = {
      R"sql(
      CREATE TABLE jobs (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        request_id TEXT UNIQUE,
        tenant TEXT NOT NULL DEFAULT '',
        state INTEGER NOT NULL,
        priority INTEGER NOT NULL,
        preset TEXT NOT NULL,
        created_unix_ms BIGINT NOT NULL,
        job BYTEA NOT NULL,
        lease_id TEXT UNIQUE,
        lease_worker TEXT,
        lease_expires_ms BIGINT,
        cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
        cancel_deadline_ms BIGINT);
      CREATE INDEX jobs_queue ON jobs (priority DESC, seq) WHERE state = 1;
      CREATE INDEX jobs_running ON jobs (lease_expires_ms) WHERE state = 2;
      CREATE INDEX jobs_by_worker ON jobs (lease_worker) WHERE state = 2;
      CREATE INDEX jobs_by_state ON jobs (state, seq);
      CREATE INDEX jobs_by_tenant ON jobs (tenant, seq);
      CREATE TABLE job_events (
        job_id TEXT NOT NULL REFERENCES jobs (id),
        sequence BIGINT NOT NULL,
        event BYTEA NOT NULL,
        PRIMARY KEY (job_id, sequence));
      CREATE TABLE job_attempts (
        job_id TEXT NOT NULL REFERENCES jobs (id),
        number INTEGER NOT NULL,
        worker_id TEXT NOT NULL,
        started_unix_ms BIGINT NOT NULL,
        ended_unix_ms BIGINT,
        error TEXT NOT NULL,
        PRIMARY KEY (job_id, number));
      CREATE TABLE audit_log (
        sequence BIGSERIAL PRIMARY KEY,
        time_unix_ms BIGINT NOT NULL,
        tenant TEXT NOT NULL,
        record BYTEA NOT NULL);
      CREATE INDEX audit_by_tenant ON audit_log (tenant, sequence);
      CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$;
      CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
        FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
      CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
        FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
      )sql",
      // 2 (#17): content keys (deduplication), followers (never claimed; they take their leader's state) and
      // deadlines on the database clock.
      R"sql(
      ALTER TABLE jobs ADD COLUMN content_key TEXT NOT NULL DEFAULT '';
      ALTER TABLE jobs ADD COLUMN follows TEXT NOT NULL DEFAULT '';
      ALTER TABLE jobs ADD COLUMN deadline_ms BIGINT;
      CREATE INDEX jobs_by_content_key ON jobs (tenant, content_key, state, seq) WHERE content_key <> '';
      CREATE INDEX jobs_followers ON jobs (seq) WHERE follows <> '' AND state IN (1, 2);
      CREATE INDEX jobs_deadlines ON jobs (deadline_ms) WHERE deadline_ms IS NOT NULL AND state IN (1, 2);
      )sql",
      // 3 (#16): the GPUs a job asks for (JobSpec.resources.gpus), so that a claim passes over jobs its worker
      // cannot run. Rows queued before this version read 0.
      R"sql(
      ALTER TABLE jobs ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0;
      )sql",
      // 4: the job's estimated peak memory (Job.needs_host_memory_bytes / needs_gpu_memory_bytes), so that a claim
      // passes over jobs its worker has not the memory for (PgWorkerFitSql). Rows queued before read 0: unknown,
      // any worker.
      R"sql(
      ALTER TABLE jobs ADD COLUMN host_memory_bytes BIGINT NOT NULL DEFAULT 0,
                       ADD COLUMN gpu_memory_bytes BIGINT NOT NULL DEFAULT 0;
      )sql",
      // 5 (#29): the audit log bounded (audit_retention.h): a DELETE of a record kAuditLogMaxRecords or more below
      // the newest passes; UPDATE, TRUNCATE and any DELETE of the newest still raise.
      absl::StrCat(R"sql(
      CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF TG_OP = 'DELETE' AND OLD.sequence <= (SELECT MAX(sequence) FROM audit_log) - )sql",
                   kAuditLogMaxRecords, R"sql( THEN RETURN OLD; END IF;
        RAISE EXCEPTION 'audit_log is append-only (records below the newest may only expire)'; END $$;
      )sql"),
      // 6 (#29 storage quota): the bytes each tenant's job rows and events hold, kept by triggers in the writing
      // transaction (the check at submit reads one row). A job row rewritten at the same size touches nothing.
      // Written to be re-run over itself (the upgrade tests roll the version back without dropping objects).
      R"sql(
      CREATE TABLE IF NOT EXISTS tenant_storage (tenant TEXT PRIMARY KEY, bytes BIGINT NOT NULL);
      DELETE FROM tenant_storage;
      INSERT INTO tenant_storage (tenant, bytes)
        SELECT tenant, SUM(b) FROM (SELECT tenant, octet_length(job)::BIGINT AS b FROM jobs
                                    UNION ALL SELECT j.tenant, octet_length(e.event)::BIGINT FROM job_events e
                                              JOIN jobs j ON e.job_id = j.id) s GROUP BY tenant;
      CREATE OR REPLACE FUNCTION jobs_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO tenant_storage (tenant, bytes) VALUES (NEW.tenant, octet_length(NEW.job))
            ON CONFLICT (tenant) DO UPDATE SET bytes = tenant_storage.bytes + EXCLUDED.bytes;
        ELSIF TG_OP = 'UPDATE' THEN
          IF octet_length(NEW.job) <> octet_length(OLD.job) THEN
            UPDATE tenant_storage SET bytes = bytes + octet_length(NEW.job) - octet_length(OLD.job)
              WHERE tenant = NEW.tenant;
          END IF;
        ELSE
          UPDATE tenant_storage SET bytes = bytes - octet_length(OLD.job) WHERE tenant = OLD.tenant;
        END IF;
        RETURN NULL; END $$;
      DROP TRIGGER IF EXISTS jobs_bytes ON jobs;
      CREATE TRIGGER jobs_bytes AFTER INSERT OR UPDATE OF job OR DELETE ON jobs
        FOR EACH ROW EXECUTE FUNCTION jobs_bytes();
      CREATE OR REPLACE FUNCTION job_events_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF TG_OP = 'INSERT' THEN
          UPDATE tenant_storage SET bytes = bytes + octet_length(NEW.event)
            WHERE tenant = (SELECT tenant FROM jobs WHERE id = NEW.job_id);
        ELSE
          UPDATE tenant_storage SET bytes = bytes - octet_length(OLD.event)
            WHERE tenant = (SELECT tenant FROM jobs WHERE id = OLD.job_id);
        END IF;
        RETURN NULL; END $$;
      DROP TRIGGER IF EXISTS job_events_bytes ON job_events;
      CREATE TRIGGER job_events_bytes AFTER INSERT OR DELETE ON job_events
        FOR EACH ROW EXECUTE FUNCTION job_events_bytes();
      )sql",
      // 7 (#29 storage quota): attempt rows count too, each as its texts' bytes plus 8 for each of its three
      // integers (kAttemptRowFixedBytes). The counter is seeded again from all three tables; written to be re-run
      // over itself.
      R"sql(
      DELETE FROM tenant_storage;
      INSERT INTO tenant_storage (tenant, bytes)
        SELECT tenant, SUM(b) FROM (SELECT tenant, octet_length(job)::BIGINT AS b FROM jobs
                                    UNION ALL SELECT j.tenant, octet_length(e.event)::BIGINT FROM job_events e
                                              JOIN jobs j ON e.job_id = j.id
                                    UNION ALL SELECT j.tenant, )sql" + PgAttemptBytes("a") + R"sql( FROM job_attempts a
                                              JOIN jobs j ON a.job_id = j.id) s GROUP BY tenant;
      CREATE OR REPLACE FUNCTION job_attempts_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF TG_OP = 'INSERT' THEN
          UPDATE tenant_storage SET bytes = bytes + )sql" + PgAttemptBytes("NEW") + R"sql(
            WHERE tenant = (SELECT tenant FROM jobs WHERE id = NEW.job_id);
        ELSIF TG_OP = 'UPDATE' THEN
          IF )sql" + PgAttemptBytes("NEW") + " <> " + PgAttemptBytes("OLD") + R"sql( THEN
            UPDATE tenant_storage SET bytes = bytes + )sql" + PgAttemptBytes("NEW") + " - " + PgAttemptBytes("OLD") + R"sql(
              WHERE tenant = (SELECT tenant FROM jobs WHERE id = NEW.job_id);
          END IF;
        ELSE
          UPDATE tenant_storage SET bytes = bytes - )sql" + PgAttemptBytes("OLD") + R"sql(
            WHERE tenant = (SELECT tenant FROM jobs WHERE id = OLD.job_id);
        END IF;
        RETURN NULL; END $$;
      DROP TRIGGER IF EXISTS job_attempts_bytes ON job_attempts;
      CREATE TRIGGER job_attempts_bytes AFTER INSERT OR UPDATE OR DELETE ON job_attempts
        FOR EACH ROW EXECUTE FUNCTION job_attempts_bytes();
      )sql",
      // 8 (#29, replicas): with one counter row per tenant, every writing transaction of the tenant held that row's
      // lock from its first trigger to its commit, so one tenant's submissions through any number of replicas
      // committed one at a time (bench/server/quota_contention_bench.sh, docs/results/service.md). The counter is
      // split into slots: a backend adds to slot pg_backend_pid() % 64 of the tenant (slots may go negative: a job
      // deleted by another connection than the one that stored it); TenantStoredBytes sums the tenant's slots.
      // Seeded again from the rows; written to be re-run over itself.
      R"sql(
      CREATE TABLE IF NOT EXISTS tenant_storage_slots (
        tenant TEXT NOT NULL, slot INTEGER NOT NULL, bytes BIGINT NOT NULL, PRIMARY KEY (tenant, slot));
      DELETE FROM tenant_storage_slots;
      INSERT INTO tenant_storage_slots (tenant, slot, bytes)
        SELECT tenant, 0, SUM(b) FROM (SELECT tenant, octet_length(job)::BIGINT AS b FROM jobs
                                       UNION ALL SELECT j.tenant, octet_length(e.event)::BIGINT FROM job_events e
                                                 JOIN jobs j ON e.job_id = j.id
                                       UNION ALL SELECT j.tenant, )sql" + PgAttemptBytes("a") + R"sql( FROM job_attempts a
                                                 JOIN jobs j ON a.job_id = j.id) s GROUP BY tenant;
      CREATE OR REPLACE FUNCTION add_tenant_bytes(t TEXT, delta BIGINT) RETURNS void LANGUAGE plpgsql AS $$ BEGIN
        IF t IS NULL OR delta = 0 THEN RETURN; END IF;
        INSERT INTO tenant_storage_slots (tenant, slot, bytes) VALUES (t, pg_backend_pid() % 64, delta)
          ON CONFLICT (tenant, slot) DO UPDATE SET bytes = tenant_storage_slots.bytes + EXCLUDED.bytes;
        END $$;
      CREATE OR REPLACE FUNCTION jobs_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF TG_OP = 'INSERT' THEN
          PERFORM add_tenant_bytes(NEW.tenant, octet_length(NEW.job));
        ELSIF TG_OP = 'UPDATE' THEN
          PERFORM add_tenant_bytes(NEW.tenant, octet_length(NEW.job) - octet_length(OLD.job));
        ELSE
          PERFORM add_tenant_bytes(OLD.tenant, -octet_length(OLD.job));
        END IF;
        RETURN NULL; END $$;
      CREATE OR REPLACE FUNCTION job_events_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF TG_OP = 'INSERT' THEN
          PERFORM add_tenant_bytes((SELECT tenant FROM jobs WHERE id = NEW.job_id), octet_length(NEW.event));
        ELSE
          PERFORM add_tenant_bytes((SELECT tenant FROM jobs WHERE id = OLD.job_id), -octet_length(OLD.event));
        END IF;
        RETURN NULL; END $$;
      CREATE OR REPLACE FUNCTION job_attempts_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF TG_OP = 'INSERT' THEN
          PERFORM add_tenant_bytes((SELECT tenant FROM jobs WHERE id = NEW.job_id), )sql" + PgAttemptBytes("NEW") + R"sql();
        ELSIF TG_OP = 'UPDATE' THEN
          PERFORM add_tenant_bytes((SELECT tenant FROM jobs WHERE id = NEW.job_id),
                                   )sql" + PgAttemptBytes("NEW") + " - " + PgAttemptBytes("OLD") + R"sql();
        ELSE
          PERFORM add_tenant_bytes((SELECT tenant FROM jobs WHERE id = OLD.job_id), -)sql" + PgAttemptBytes("OLD") + R"sql();
        END IF;
        RETURN NULL; END $$;
      DROP TABLE IF EXISTS tenant_storage;
      )sql",
  };
  return migrations;
}

}  // namespace

absl::Status MigratePostgres(PGconn* conn) {
  absl::Status status = PgExecScript(conn, "BEGIN");
  if (!status.ok()) return status;
  auto fail = [conn](const absl::Status& error) {
    PgExecScript(conn, "ROLLBACK").IgnoreError();
    return absl::InternalError(absl::StrCat("store: schema migration: ", error.message()));
  };
  absl::StatusOr<PgResult> locked = PgExec(conn, absl::StrCat("SELECT pg_advisory_xact_lock(", kMigrationLock, ")"));
  if (!locked.ok()) return fail(locked.status());
  status = PgExecScript(conn, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
  if (!status.ok()) return fail(status);
  absl::StatusOr<PgResult> current = PgExec(conn, "SELECT COALESCE(MAX(version), 0) FROM schema_version");
  if (!current.ok()) return fail(current.status());
  int version = static_cast<int>(current->Int(0, 0));
  int latest = static_cast<int>(PgMigrations().size());
  if (version > latest) {
    PgExecScript(conn, "ROLLBACK").IgnoreError();
    return absl::FailedPreconditionError(
        absl::StrCat("store: PostgreSQL schema version ", version, " is newer than this quarkd's ", latest));
  }
  for (int v = version; v < latest; ++v) {
    status = PgExecScript(conn, PgMigrations()[v]);
    if (status.ok()) {
      status = PgExecScript(conn, absl::StrCat("INSERT INTO schema_version (version) VALUES (", v + 1, ")"));
    }
    if (!status.ok()) return fail(status);
  }
  return PgExecScript(conn, "COMMIT");
}

}  // namespace quark::server
