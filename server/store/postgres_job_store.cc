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
#include "server/store/postgres_schema.h"

namespace quark::server {
namespace {

using google::protobuf::util::TimeUtil;
using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;

constexpr int kMaxRetries = 10;
// The filter's labels (its tenant and states are in the query).
bool LabelsMatch(const JobFilter& filter, const Job& job) {
  for (const auto& [key, value] : filter.labels) {
    auto it = job.spec().labels().find(key);
    if (it == job.spec().labels().end() || it->second != value) return false;
  }
  return true;
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
  absl::Status migrated = MigratePostgres(conns.front().get());
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

absl::Status PostgresJobStore::WithReadConnection(const std::function<absl::Status(PGconn*)>& body) {
  PgConn conn = pool_->Take();
  absl::Status status = body(conn.get());
  // After a restart the first query on an old connection reads the server's goodbye ("server closed the connection
  // unexpectedly") while PQstatus may still say OK: a failed read probes its connection before judging it.
  if (!status.ok() && (PQstatus(conn.get()) != CONNECTION_OK || !PgExecScript(conn.get(), "SELECT 1").ok())) {
    PQreset(conn.get());
    if (PQstatus(conn.get()) == CONNECTION_OK) status = body(conn.get());
  }
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
      absl::StatusOr<Job> parsed = ParseStoredJob(existing->Bytes(0, 1), job.request_id());
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
  absl::Status status = WithReadConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result = PgExec(conn, "SELECT job FROM jobs WHERE id = $1", PgParams().Add(id));
    if (!result.ok()) return result.status();
    if (result->rows() == 0) return JobNotFoundError(id);
    absl::StatusOr<Job> parsed = ParseStoredJob(result->Bytes(0, 0), id);
    if (!parsed.ok()) return parsed.status();
    job = std::move(*parsed);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return job;
}

absl::StatusOr<StoredJob> PostgresJobStore::FindByRequestId(const std::string& tenant, const std::string& request_id) {
  StoredJob stored;
  absl::Status status = WithReadConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result = PgExec(conn, "SELECT seq, job FROM jobs WHERE request_id = $1",
                                             PgParams().Add(ScopedRequestId(tenant, request_id)));
    if (!result.ok()) return result.status();
    if (result->rows() == 0) return absl::NotFoundError(absl::StrCat("request_id \"", request_id, "\" not found"));
    absl::StatusOr<Job> parsed = ParseStoredJob(result->Bytes(0, 1), request_id);
    if (!parsed.ok()) return parsed.status();
    stored = StoredJob{result->Int(0, 0), std::move(*parsed)};
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return stored;
}

absl::StatusOr<Job> PostgresJobStore::FindByContentKey(const std::string& tenant, const std::string& key) {
  Job job;
  absl::Status status = WithReadConnection([&](PGconn* conn) -> absl::Status {
    // SUCCEEDED (3) first, then QUEUED/RUNNING (1, 2); newest first in each.
    absl::StatusOr<PgResult> result =
        PgExec(conn,
               "SELECT seq, job FROM jobs WHERE tenant = $1 AND content_key = $2 AND state IN (1, 2, 3) "
               "ORDER BY state = 3 DESC, seq DESC LIMIT 1",
               PgParams().Add(tenant).Add(key));
    if (!result.ok()) return result.status();
    if (result->rows() == 0) return absl::NotFoundError(absl::StrCat("no job with content key ", key));
    absl::StatusOr<Job> parsed = ParseStoredJob(result->Bytes(0, 1), key);
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
      absl::StatusOr<Job> job = ParseStoredJob(result->Bytes(i, 1), absl::StrCat("seq ", result->Int(i, 0)));
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
        absl::StatusOr<Job> job = ParseStoredJob(result->Bytes(i, 1), absl::StrCat("seq ", seq));
        if (!job.ok()) return job.status();
        const bool matches = LabelsMatch(filter, *job);
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
  absl::Status status = WithReadConnection([&](PGconn* conn) -> absl::Status {
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
  absl::Status status = WithReadConnection([&](PGconn* conn) -> absl::Status {
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
