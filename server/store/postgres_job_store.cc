#include "server/store/postgres_job_store.h"

#include <poll.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/log.h"
#include "google/protobuf/util/time_util.h"
#include "server/log_text.h"
#include "server/store/audit_retention.h"

namespace quark::server {
namespace {

using google::protobuf::util::TimeUtil;
using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;

constexpr int kMaxRetries = 10;
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
  };
  return migrations;
}

absl::Status Migrate(PGconn* conn) {
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

bool Matches(const JobFilter& filter, const Job& job) {
  for (const auto& [key, value] : filter.labels) {
    auto it = job.spec().labels().find(key);
    if (it == job.spec().labels().end() || it->second != value) return false;
  }
  return true;
}

absl::StatusOr<Job> ParseJob(const std::string& bytes, const std::string& where) {
  Job job;
  if (!job.ParseFromString(bytes)) return absl::DataLossError(absl::StrCat("job store: unreadable job row ", where));
  return job;
}

}  // namespace

// A fixed set of connections handed out one call at a time; a broken one is reset when taken.
class PostgresJobStore::Pool {
 public:
  Pool(std::string dsn, std::vector<PgConn> conns) : dsn_(std::move(dsn)), free_(std::move(conns)) {}

  PgConn Take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !free_.empty(); });
    PgConn conn = std::move(free_.back());
    free_.pop_back();
    lock.unlock();
    if (PQstatus(conn.get()) != CONNECTION_OK) PQreset(conn.get());
    return conn;
  }
  void Give(PgConn conn) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(conn));
    cv_.notify_one();
  }

 private:
  const std::string dsn_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PgConn> free_;
};

PostgresJobStore::PostgresJobStore(std::string dsn, std::unique_ptr<Pool> pool)
    : dsn_(std::move(dsn)), pool_(std::move(pool)) {}

PostgresJobStore::~PostgresJobStore() { StopListening(); }

absl::StatusOr<std::unique_ptr<PostgresJobStore>> PostgresJobStore::Open(const std::string& dsn, int connections) {
  std::vector<PgConn> conns;
  for (int i = 0; i < std::max(1, connections); ++i) {
    absl::StatusOr<PgConn> conn = ConnectPg(dsn);
    if (!conn.ok()) return conn.status();
    // Quiet NOTICEs (e.g. "relation already exists, skipping") instead of libpq printing them on stderr.
    PQsetNoticeProcessor(conn->get(), [](void*, const char*) {}, nullptr);
    conns.push_back(std::move(*conn));
  }
  absl::Status migrated = Migrate(conns.front().get());
  if (!migrated.ok()) return migrated;
  return std::unique_ptr<PostgresJobStore>(
      new PostgresJobStore(dsn, std::make_unique<Pool>(dsn, std::move(conns))));
}

absl::Status PostgresJobStore::WithConnection(const std::function<absl::Status(PGconn*)>& body) {
  PgConn conn = pool_->Take();
  absl::Status status = body(conn.get());
  pool_->Give(std::move(conn));
  return status;
}

absl::Status PostgresJobStore::InTransaction(const std::function<absl::Status(PGconn*)>& body) {
  absl::Status status;
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    PgConn conn = pool_->Take();
    status = PgExecScript(conn.get(), "BEGIN");
    bool began = status.ok();
    if (began) status = body(conn.get());
    if (began && status.ok()) status = PgExecScript(conn.get(), "COMMIT");
    if (!status.ok() && PQtransactionStatus(conn.get()) != PQTRANS_IDLE) {
      PgExecScript(conn.get(), "ROLLBACK").IgnoreError();
    }
    bool broken = PQstatus(conn.get()) != CONNECTION_OK;
    if (broken) PQreset(conn.get());
    pool_->Give(std::move(conn));
    // Retry conflicts, and a connection found dead at BEGIN (nothing was sent); never an ambiguous COMMIT.
    bool retry = status.code() == absl::StatusCode::kAborted || (!began && broken);
    if (!retry) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * (attempt + 1)));
  }
  return status;
}

absl::StatusOr<StoredJob> PostgresJobStore::CreateJob(const Job& job, std::vector<JobEvent>* events, bool* created) {
  StoredJob stored;
  absl::Status status = InTransaction([&](PGconn* conn) -> absl::Status {
    *created = false;
    PgParams params;
    params.Add(job.id());
    if (job.request_id().empty()) {
      params.AddNull();
    } else {
      params.Add(ScopedRequestId(job.tenant(), job.request_id()));
    }
    params.Add(job.tenant()).Add(static_cast<int64_t>(job.state())).Add(static_cast<int64_t>(job.spec().priority()));
    params.Add(PresetLabel(job.spec())).Add(TimeUtil::TimestampToMilliseconds(job.created_at()));
    params.AddBytes(job.SerializeAsString());
    // A follower (deduplicated, not final) is never claimed; the deadline runs on the database clock.
    params.Add(job.content_key()).Add(job.state() == JobState::JOB_STATE_QUEUED || job.state() == JobState::JOB_STATE_RUNNING
                                                    ? job.deduplicated_from()
                                                    : std::string());
    params.Add(job.spec().deadline_seconds());
    params.Add(static_cast<int64_t>(job.spec().resources().gpus()));
    params.Add(job.needs_host_memory_bytes()).Add(job.needs_gpu_memory_bytes());
    // ON CONFLICT waits for a concurrent insert of the same request id (another replica) to commit, then skips.
    absl::StatusOr<PgResult> inserted = PgExec(
        conn,
        absl::StrCat("INSERT INTO jobs (id, request_id, tenant, state, priority, preset, created_unix_ms, job, "
                     "content_key, follows, deadline_ms, gpus, host_memory_bytes, gpu_memory_bytes) VALUES ($1, $2, "
                     "$3, $4, $5, $6, $7, $8, $9, $10, CASE WHEN $11::BIGINT > 0 THEN ", kPgNowMs,
                     " + $11::BIGINT * 1000 END, $12, $13, $14) "
                     "ON CONFLICT (request_id) DO NOTHING RETURNING seq"),
        params);
    if (!inserted.ok()) return inserted.status();
    if (inserted->rows() == 0) {
      absl::StatusOr<PgResult> existing = PgExec(conn, "SELECT seq, job FROM jobs WHERE request_id = $1",
                                                 PgParams().Add(ScopedRequestId(job.tenant(), job.request_id())));
      if (!existing.ok()) return existing.status();
      if (existing->rows() == 0) return absl::AbortedError("request_id insert conflict without a row; retrying");
      absl::StatusOr<Job> parsed = ParseJob(existing->Bytes(0, 1), job.request_id());
      if (!parsed.ok()) return parsed.status();
      stored = StoredJob{existing->Int(0, 0), std::move(*parsed)};
      return absl::OkStatus();
    }
    stored = StoredJob{inserted->Int(0, 0), job};
    LeaseRow row;
    row.order = stored.order;
    row.job = job;
    *created = true;
    std::vector<JobEvent> copy = events != nullptr ? *events : std::vector<JobEvent>();
    absl::Status written = WritePgRow(conn, row, &copy);
    if (written.ok() && events != nullptr) *events = std::move(copy);
    return written;
  });
  if (!status.ok()) return status;
  return stored;
}

absl::Status PostgresJobStore::UpdateJob(const Job& job, std::vector<JobEvent>* events) {
  return InTransaction([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> locked =
        PgExec(conn, absl::StrCat("SELECT ", kPgRowColumns, " FROM jobs WHERE id = $1 FOR UPDATE"),
               PgParams().Add(job.id()));
    if (!locked.ok()) return locked.status();
    if (locked->rows() == 0) return absl::NotFoundError(absl::StrCat("job ", job.id(), " not found"));
    absl::StatusOr<LeaseRow> row = ParsePgRow(*locked, 0);
    if (!row.ok()) return row.status();
    row->job = job;
    std::vector<JobEvent> copy = events != nullptr ? *events : std::vector<JobEvent>();
    absl::Status written = WritePgRow(conn, *row, &copy);
    if (written.ok() && events != nullptr) *events = std::move(copy);
    return written;
  });
}

absl::StatusOr<Job> PostgresJobStore::GetJob(const std::string& id) {
  Job job;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result = PgExec(conn, "SELECT job FROM jobs WHERE id = $1", PgParams().Add(id));
    if (!result.ok()) return result.status();
    if (result->rows() == 0) return JobNotFoundError(id);
    absl::StatusOr<Job> parsed = ParseJob(result->Bytes(0, 0), id);
    if (!parsed.ok()) return parsed.status();
    job = std::move(*parsed);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return job;
}

absl::StatusOr<StoredJob> PostgresJobStore::FindByRequestId(const std::string& tenant, const std::string& request_id) {
  StoredJob stored;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result = PgExec(conn, "SELECT seq, job FROM jobs WHERE request_id = $1",
                                             PgParams().Add(ScopedRequestId(tenant, request_id)));
    if (!result.ok()) return result.status();
    if (result->rows() == 0) return absl::NotFoundError(absl::StrCat("request_id \"", request_id, "\" not found"));
    absl::StatusOr<Job> parsed = ParseJob(result->Bytes(0, 1), request_id);
    if (!parsed.ok()) return parsed.status();
    stored = StoredJob{result->Int(0, 0), std::move(*parsed)};
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return stored;
}

absl::StatusOr<Job> PostgresJobStore::FindByContentKey(const std::string& tenant, const std::string& key) {
  Job job;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    // SUCCEEDED (3) first, then QUEUED/RUNNING (1, 2); newest first in each.
    absl::StatusOr<PgResult> result =
        PgExec(conn,
               "SELECT seq, job FROM jobs WHERE tenant = $1 AND content_key = $2 AND state IN (1, 2, 3) "
               "ORDER BY state = 3 DESC, seq DESC LIMIT 1",
               PgParams().Add(tenant).Add(key));
    if (!result.ok()) return result.status();
    if (result->rows() == 0) return absl::NotFoundError(absl::StrCat("no job with content key ", key));
    absl::StatusOr<Job> parsed = ParseJob(result->Bytes(0, 1), key);
    if (!parsed.ok()) return parsed.status();
    job = std::move(*parsed);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return job;
}

absl::StatusOr<std::vector<StoredJob>> PostgresJobStore::LoadJobs(const std::vector<JobState>& states) {
  std::vector<StoredJob> jobs;
  std::vector<std::string> numbers;
  for (JobState state : states) numbers.push_back(absl::StrCat(static_cast<int>(state)));
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result =
        PgExec(conn, "SELECT seq, job FROM jobs WHERE state = ANY($1::int[]) ORDER BY seq",
               PgParams().Add(absl::StrCat("{", absl::StrJoin(numbers, ","), "}")));
    if (!result.ok()) return result.status();
    for (int i = 0; i < result->rows(); ++i) {
      absl::StatusOr<Job> job = ParseJob(result->Bytes(i, 1), absl::StrCat("seq ", result->Int(i, 0)));
      if (!job.ok()) return job.status();
      jobs.push_back(StoredJob{result->Int(i, 0), std::move(*job)});
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return jobs;
}

absl::StatusOr<JobPage> PostgresJobStore::ListJobs(const JobFilter& filter, int page_size,
                                                   const std::string& page_token) {
  int64_t cursor = INT64_MAX;
  if (!page_token.empty() && (!absl::SimpleAtoi(page_token, &cursor) || cursor <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("page_token: \"", page_token, "\" is not a token from ListJobs"));
  }
  std::vector<std::string> numbers;
  for (JobState state : filter.states) numbers.push_back(absl::StrCat(static_cast<int>(state)));
  JobPage page;
  constexpr int kScanBatch = 256;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    bool exhausted = false;
    PageBytes bytes(filter.max_page_bytes);
    while (static_cast<int>(page.jobs.size()) < page_size && !exhausted && !bytes.full()) {
      PgParams params;
      params.Add(cursor).Add(int64_t{kScanBatch});
      std::string sql = "SELECT seq, job FROM jobs WHERE seq < $1";
      int next = 3;
      if (!numbers.empty()) {
        params.Add(absl::StrCat("{", absl::StrJoin(numbers, ","), "}"));
        absl::StrAppend(&sql, " AND state = ANY($", next++, "::int[])");
      }
      if (filter.tenant.has_value()) {
        params.Add(*filter.tenant);
        absl::StrAppend(&sql, " AND tenant = $", next++);
      }
      absl::StrAppend(&sql, " ORDER BY seq DESC LIMIT $2");
      absl::StatusOr<PgResult> result = PgExec(conn, sql, params);
      if (!result.ok()) return result.status();
      int rows = 0;
      for (int i = 0; i < result->rows() && static_cast<int>(page.jobs.size()) < page_size && !bytes.full();
           ++i, ++rows) {
        const int64_t seq = result->Int(i, 0);
        absl::StatusOr<Job> job = ParseJob(result->Bytes(i, 1), absl::StrCat("seq ", seq));
        if (!job.ok()) return job.status();
        const bool matches = Matches(filter, *job);
        if (matches && !bytes.Take(*job)) break;  // this job starts the next page: the cursor stays before it
        cursor = seq;
        if (matches) page.jobs.push_back(std::move(*job));
      }
      exhausted = result->rows() < kScanBatch && static_cast<int>(page.jobs.size()) < page_size && !bytes.full();
    }
    if (!exhausted && cursor > 1) page.next_page_token = absl::StrCat(cursor);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return page;
}

absl::StatusOr<std::vector<JobEvent>> PostgresJobStore::ListEvents(const std::string& job_id, int64_t after_sequence,
                                                                   int limit) {
  std::vector<JobEvent> events;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result = PgExec(
        conn, "SELECT event FROM job_events WHERE job_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
        PgParams().Add(job_id).Add(after_sequence).Add(static_cast<int64_t>(limit)));
    if (!result.ok()) return result.status();
    for (int i = 0; i < result->rows(); ++i) {
      if (!events.emplace_back().ParseFromString(result->Bytes(i, 0))) {
        return absl::DataLossError(absl::StrCat("job store: unreadable event of job ", job_id));
      }
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return events;
}

absl::StatusOr<std::map<std::pair<JobState, std::string>, int64_t>> PostgresJobStore::CountJobs() {
  std::map<std::pair<JobState, std::string>, int64_t> counts;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result = PgExec(conn, "SELECT state, preset, COUNT(*) FROM jobs GROUP BY state, preset");
    if (!result.ok()) return result.status();
    for (int i = 0; i < result->rows(); ++i) {
      counts[{static_cast<JobState>(result->Int(i, 0)), result->Text(i, 1)}] = result->Int(i, 2);
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return counts;
}

absl::Status PostgresJobStore::AppendAudit(quark::v1::AuditRecord* record) {
  record->set_sequence(0);
  return WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result = PgExec(
        conn, "INSERT INTO audit_log (time_unix_ms, tenant, record) VALUES ($1, $2, $3) RETURNING sequence",
        PgParams().Add(TimeUtil::TimestampToMilliseconds(record->time())).Add(record->tenant())
            .AddBytes(record->SerializeAsString()));
    if (!result.ok()) return result.status();
    record->set_sequence(result->Int(0, 0));
    // The retention rule (audit_retention.h): records kAuditLogMaxRecords below the new one expire.
    if (record->sequence() <= kAuditLogMaxRecords) return absl::OkStatus();
    return PgExec(conn, "DELETE FROM audit_log WHERE sequence <= $1",
                  PgParams().Add(record->sequence() - kAuditLogMaxRecords)).status();
  });
}

absl::StatusOr<std::vector<quark::v1::AuditRecord>> PostgresJobStore::ListAudit(int64_t after_sequence, int limit,
                                                                               const std::string& tenant) {
  std::vector<quark::v1::AuditRecord> records;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    PgParams params;
    params.Add(after_sequence).Add(static_cast<int64_t>(limit));
    std::string sql = "SELECT sequence, record FROM audit_log WHERE sequence > $1";
    if (!tenant.empty()) {
      params.Add(tenant);
      sql += " AND tenant = $3";
    }
    absl::StatusOr<PgResult> result = PgExec(conn, sql + " ORDER BY sequence LIMIT $2", params);
    if (!result.ok()) return result.status();
    for (int i = 0; i < result->rows(); ++i) {
      quark::v1::AuditRecord& record = records.emplace_back();
      if (!record.ParseFromString(result->Bytes(i, 1))) {
        return absl::DataLossError(absl::StrCat("job store: unreadable audit record ", result->Int(i, 0)));
      }
      record.set_sequence(result->Int(i, 0));
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return records;
}

void PostgresJobStore::StartListening(NotifyCallback on_notify, std::function<void()> on_connected) {
  on_notify_ = std::move(on_notify);
  on_connected_ = std::move(on_connected);
  stop_listening_.store(false);
  listener_ = std::thread([this] { ListenLoop(); });
}

void PostgresJobStore::StopListening() {
  stop_listening_.store(true);
  if (listener_.joinable()) listener_.join();
}

void PostgresJobStore::ListenLoop() {
  auto backoff = std::chrono::milliseconds(100);
  while (!stop_listening_.load()) {
    absl::StatusOr<PgConn> conn = ConnectPg(dsn_);
    absl::Status status = conn.ok() ? PgExecScript(conn->get(), absl::StrCat("LISTEN ", kEventsChannel, "; LISTEN ",
                                                                             kQueueChannel))
                                    : conn.status();
    if (!status.ok()) {
      log::Get("store")->warn("job=- LISTEN connection: {}; retrying", ForLog(status.ToString()));
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
      continue;
    }
    backoff = std::chrono::milliseconds(100);
    if (on_connected_) on_connected_();  // whatever was notified while we were away is read from the tables
    PGconn* raw = conn->get();
    while (!stop_listening_.load()) {
      pollfd fd{PQsocket(raw), POLLIN, 0};
      if (poll(&fd, 1, 200) < 0) continue;
      if (PQconsumeInput(raw) == 0) break;  // the connection is gone: reconnect
      while (PGnotify* notify = PQnotifies(raw)) {
        std::string channel = notify->relname;
        std::string payload = notify->extra != nullptr ? notify->extra : "";
        PQfreemem(notify);
        if (on_notify_) on_notify_(channel, payload);
      }
    }
  }
}

}  // namespace quark::server
