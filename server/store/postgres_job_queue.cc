// PostgresJobStore's SharedJobQueue: rows locked FOR UPDATE (SKIP LOCKED where peers may compete), decided by a
// RowUpdate on the database's clock, written back with their attempts and events in the same transaction.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "server/store/postgres_job_store.h"

namespace quark::server {
namespace {

using google::protobuf::util::TimeUtil;
using quark::v1::JobEvent;
using quark::v1::JobState;

constexpr const char* kNowMs = kPgNowMs;
// Held (to commit) by claims under tenant running limits: the count of a tenant's running jobs and the claim
// that may add one must not interleave with another replica's.
constexpr int64_t kLimitedClaimLock = 0x717561726b6c;

// " AND tenant NOT IN ($1, ...)" naming the tenants of `limits` that run as many jobs as allowed (followers run
// nothing themselves), their names added to `params`; "" when none is full. Takes kLimitedClaimLock first.
absl::StatusOr<std::string> SkipFullTenants(PGconn* conn, const std::map<std::string, int64_t>& limits,
                                            PgParams* params) {
  absl::StatusOr<PgResult> locked = PgExec(conn, absl::StrCat("SELECT pg_advisory_xact_lock(", kLimitedClaimLock, ")"));
  if (!locked.ok()) return locked.status();
  absl::StatusOr<PgResult> running =
      PgExec(conn, "SELECT tenant, COUNT(*) FROM jobs WHERE state = 2 AND follows = '' GROUP BY tenant");
  if (!running.ok()) return running.status();
  std::vector<std::string> placeholders;
  for (int i = 0; i < running->rows(); ++i) {
    auto limit = limits.find(running->Text(i, 0));
    if (limit == limits.end() || limit->second <= 0 || running->Int(i, 1) < limit->second) continue;
    params->Add(running->Text(i, 0));
    placeholders.push_back(absl::StrCat("$", params->size()));
  }
  if (placeholders.empty()) return std::string();
  return absl::StrCat(" AND tenant NOT IN (", absl::StrJoin(placeholders, ", "), ")");
}

absl::StatusOr<int64_t> DbNowMs(PGconn* conn) {
  absl::StatusOr<PgResult> now = PgExec(conn, absl::StrCat("SELECT ", kNowMs));
  if (!now.ok()) return now.status();
  return now->Int(0, 0);
}

absl::Status AppendEvents(PGconn* conn, const std::string& job_id, std::vector<JobEvent>* events) {
  if (events->empty()) return absl::OkStatus();
  absl::StatusOr<PgResult> max = PgExec(conn, "SELECT COALESCE(MAX(sequence), 0) FROM job_events WHERE job_id = $1",
                                        PgParams().Add(job_id));
  if (!max.ok()) return max.status();
  int64_t sequence = max->Int(0, 0);
  int64_t first = sequence + 1;
  for (JobEvent& event : *events) {
    event.set_job_id(job_id);
    event.set_sequence(++sequence);
    absl::StatusOr<PgResult> inserted =
        PgExec(conn, "INSERT INTO job_events (job_id, sequence, event) VALUES ($1, $2, $3)",
               PgParams().Add(job_id).Add(sequence).AddBytes(event.SerializeAsString()));
    if (!inserted.ok()) return inserted.status();
  }
  // Delivered at COMMIT, to every replica LISTENing (this one too).
  absl::StatusOr<PgResult> notified = PgExec(conn, absl::StrCat("SELECT pg_notify('", kEventsChannel, "', $1)"),
                                             PgParams().Add(absl::StrCat(job_id, " ", first)));
  return notified.status();
}

// Up to kMaxPassOvers QUEUED jobs ahead of `claimed` (of any, when nothing was claimed) that the claim's filters
// (`skip`, with its `params`) and `worker`'s GPUs let through but its memory did not.
absl::StatusOr<std::vector<MemoryPassOver>> MemoryPassOvers(PGconn* conn, const std::string& skip,
                                                            const PgParams& params, const WorkerCapacity& worker,
                                                            const std::optional<LeaseRow>& claimed) {
  std::string ahead;
  if (claimed.has_value()) {
    const int64_t priority = claimed->job.spec().priority();
    ahead = absl::StrCat(" AND (priority > ", priority, " OR (priority = ", priority, " AND seq < ", claimed->order,
                         "))");
  }
  absl::StatusOr<PgResult> found = PgExec(
      conn,
      absl::StrCat("SELECT id, gpus, host_memory_bytes, gpu_memory_bytes FROM jobs WHERE state = 1 AND follows = ''",
                   skip, " AND gpus <= ", worker.gpus, " AND NOT ", PgMemoryFitSql(worker), ahead,
                   " ORDER BY priority DESC, seq LIMIT ", SharedJobQueue::kMaxPassOvers),
      params);
  if (!found.ok()) return found.status();
  std::vector<MemoryPassOver> out;
  for (int i = 0; i < found->rows(); ++i) {
    MemoryPassOver& pass = out.emplace_back();
    pass.job_id = found->Text(i, 0);
    pass.demand.gpus = static_cast<int>(found->Int(i, 1));
    pass.demand.host_memory_bytes = found->Int(i, 2);
    pass.demand.gpu_memory_bytes = found->Int(i, 3);
  }
  return out;
}

}  // namespace

std::string PgMemoryFitSql(const WorkerCapacity& worker) {
  // A job's 0 (unknown) is below any positive announcement; a worker's 0 (unknown) drops the condition.
  std::vector<std::string> conditions;
  if (worker.host_memory_bytes > 0) conditions.push_back(absl::StrCat("host_memory_bytes <= ", worker.host_memory_bytes));
  if (worker.gpu_memory_bytes > 0) conditions.push_back(absl::StrCat("gpu_memory_bytes <= ", worker.gpu_memory_bytes));
  if (conditions.empty()) return "TRUE";
  return absl::StrCat("(", absl::StrJoin(conditions, " AND "), ")");
}

std::string PgWorkerFitSql(const WorkerCapacity& worker) {
  return absl::StrCat("(gpus <= ", worker.gpus, " AND ", PgMemoryFitSql(worker), ")");
}

absl::StatusOr<LeaseRow> ParsePgRow(const PgResult& result, int i) {
  LeaseRow row;
  row.order = result.Int(i, 0);
  if (!row.job.ParseFromString(result.Bytes(i, 1))) {
    return absl::DataLossError(absl::StrCat("job store: unreadable job row seq ", row.order));
  }
  row.lease_id = result.Text(i, 2);
  row.lease_worker = result.Text(i, 3);
  row.lease_expires_ms = result.Int(i, 4);
  row.cancel_requested = result.Bool(i, 5);
  row.cancel_deadline_ms = result.Int(i, 6);
  return row;
}

absl::Status WritePgRow(PGconn* conn, const LeaseRow& row, std::vector<JobEvent>* events) {
  const quark::v1::Job& job = row.job;
  bool running = job.state() == JobState::JOB_STATE_RUNNING;
  PgParams params;
  params.Add(job.id()).Add(static_cast<int64_t>(job.state())).Add(static_cast<int64_t>(job.spec().priority()));
  params.AddBytes(job.SerializeAsString());
  if (running && !row.lease_id.empty()) {
    params.Add(row.lease_id).Add(row.lease_worker).Add(row.lease_expires_ms);
  } else {
    params.AddNull().AddNull().AddNull();
  }
  params.Add(std::string(row.cancel_requested ? "t" : "f"));
  if (row.cancel_requested) {
    params.Add(row.cancel_deadline_ms);
  } else {
    params.AddNull();
  }
  absl::StatusOr<PgResult> updated = PgExec(
      conn,
      "UPDATE jobs SET state = $2, priority = $3, job = $4, lease_id = $5, lease_worker = $6, lease_expires_ms = $7, "
      "cancel_requested = $8, cancel_deadline_ms = $9 WHERE id = $1",
      params);
  if (!updated.ok()) return updated.status();
  if (updated->Affected() == 0) return absl::NotFoundError(absl::StrCat("job ", job.id(), " not found"));
  for (const quark::v1::Attempt& attempt : job.attempts()) {
    PgParams a;
    a.Add(job.id()).Add(static_cast<int64_t>(attempt.number())).Add(attempt.worker_id());
    a.Add(TimeUtil::TimestampToMilliseconds(attempt.started_at()));
    if (attempt.has_ended_at()) {
      a.Add(TimeUtil::TimestampToMilliseconds(attempt.ended_at()));
    } else {
      a.AddNull();
    }
    a.Add(attempt.error());
    absl::StatusOr<PgResult> upserted = PgExec(
        conn,
        "INSERT INTO job_attempts (job_id, number, worker_id, started_unix_ms, ended_unix_ms, error) "
        "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job_id, number) DO UPDATE SET worker_id = EXCLUDED.worker_id, "
        "started_unix_ms = EXCLUDED.started_unix_ms, ended_unix_ms = EXCLUDED.ended_unix_ms, error = EXCLUDED.error",
        a);
    if (!upserted.ok()) return upserted.status();
  }
  if (job.state() == JobState::JOB_STATE_QUEUED) {
    absl::StatusOr<PgResult> notified =
        PgExec(conn, absl::StrCat("SELECT pg_notify('", kQueueChannel, "', $1)"), PgParams().Add(job.id()));
    if (!notified.ok()) return notified.status();
  }
  return AppendEvents(conn, job.id(), events);
}

absl::Status PostgresJobStore::UpdateLockedRow(PGconn* conn, const std::string& select_sql, const PgParams& params,
                                               const RowUpdate& update, LeaseRow* out, bool* found, bool* changed) {
  *found = false;
  *changed = false;
  absl::StatusOr<PgResult> locked = PgExec(conn, select_sql, params);
  if (!locked.ok()) return locked.status();
  if (locked->rows() == 0) return absl::OkStatus();
  absl::StatusOr<LeaseRow> row = ParsePgRow(*locked, 0);
  if (!row.ok()) return row.status();
  *found = true;
  absl::StatusOr<int64_t> now = DbNowMs(conn);
  if (!now.ok()) return now.status();
  std::vector<JobEvent> events;
  if (update(*now, &*row, &events)) {
    absl::Status written = WritePgRow(conn, *row, &events);
    if (!written.ok()) return written;
    *changed = true;
  }
  *out = std::move(*row);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<LeaseRow>> PostgresJobStore::ClaimNext(
    const std::string& worker_id, int max_held, const RowUpdate& update,
    const std::map<std::string, int64_t>& tenant_limits, const WorkerCapacity& worker,
    std::vector<MemoryPassOver>* passed_over) {
  std::optional<LeaseRow> claimed;
  absl::Status status = InTransaction([&](PGconn* conn) -> absl::Status {
    claimed.reset();
    if (passed_over != nullptr) passed_over->clear();
    if (max_held > 0) {
      absl::StatusOr<PgResult> held =
          PgExec(conn, "SELECT COUNT(*) FROM jobs WHERE state = 2 AND lease_worker = $1", PgParams().Add(worker_id));
      if (!held.ok()) return held.status();
      if (held->Int(0, 0) >= max_held) return absl::OkStatus();
    }
    PgParams params;
    std::string skip;
    if (!tenant_limits.empty()) {
      absl::StatusOr<std::string> full = SkipFullTenants(conn, tenant_limits, &params);
      if (!full.ok()) return full.status();
      skip = *full;
    }
    LeaseRow row;
    bool found = false;
    bool changed = false;
    absl::Status s = UpdateLockedRow(
        conn,
        absl::StrCat("SELECT ", kPgRowColumns, " FROM jobs WHERE state = 1 AND follows = ''", skip, " AND ",
                     PgWorkerFitSql(worker), " ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED"),
        params, update, &row, &found, &changed);
    if (s.ok() && changed) claimed = std::move(row);
    // Only a worker that announced memory can pass a job over for it.
    if (s.ok() && passed_over != nullptr && (worker.host_memory_bytes > 0 || worker.gpu_memory_bytes > 0)) {
      absl::StatusOr<std::vector<MemoryPassOver>> passes = MemoryPassOvers(conn, skip, params, worker, claimed);
      if (!passes.ok()) return passes.status();
      *passed_over = std::move(*passes);
    }
    return s;
  });
  if (!status.ok()) return status;
  return claimed;
}

absl::StatusOr<LeaseRow> PostgresJobStore::UpdateJobRow(const std::string& job_id, const RowUpdate& update) {
  LeaseRow row;
  absl::Status status = InTransaction([&](PGconn* conn) -> absl::Status {
    bool found = false;
    bool changed = false;
    absl::Status s = UpdateLockedRow(conn, absl::StrCat("SELECT ", kPgRowColumns, " FROM jobs WHERE id = $1 FOR UPDATE"),
                                     PgParams().Add(job_id), update, &row, &found, &changed);
    if (s.ok() && !found) return JobNotFoundError(job_id);
    return s;
  });
  if (!status.ok()) return status;
  return row;
}

absl::StatusOr<LeaseRow> PostgresJobStore::UpdateLeasedRow(const std::string& lease_id, const RowUpdate& update) {
  LeaseRow row;
  absl::Status status = InTransaction([&](PGconn* conn) -> absl::Status {
    bool found = false;
    bool changed = false;
    absl::Status s = UpdateLockedRow(
        conn, absl::StrCat("SELECT ", kPgRowColumns, " FROM jobs WHERE lease_id = $1 AND state = 2 FOR UPDATE"),
        PgParams().Add(lease_id), update, &row, &found, &changed);
    if (s.ok() && !found) {
      return absl::NotFoundError(absl::StrCat("lease_id: \"", lease_id, "\" is not held (lost or completed)"));
    }
    return s;
  });
  if (!status.ok()) return status;
  return row;
}

absl::StatusOr<bool> PostgresJobStore::RenewLease(const std::string& lease_id, int64_t ttl_ms) {
  bool cancel = false;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result = PgExec(
        conn,
        absl::StrCat("UPDATE jobs SET lease_expires_ms = ", kNowMs,
                     " + $2 WHERE lease_id = $1 AND state = 2 RETURNING cancel_requested"),
        PgParams().Add(lease_id).Add(ttl_ms));
    if (!result.ok()) return result.status();
    if (result->rows() == 0) {
      return absl::NotFoundError(absl::StrCat("lease_id: \"", lease_id, "\" is not held (lost or completed)"));
    }
    cancel = result->Bool(0, 0);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return cancel;
}

absl::StatusOr<std::vector<LeaseRow>> PostgresJobStore::UpdateStaleRows(Stale which, const std::string& worker_id,
                                                                        int limit, const RowUpdate& update) {
  std::string where;
  PgParams params;
  params.Add(static_cast<int64_t>(limit));
  switch (which) {
    case Stale::kLeaseExpired: where = absl::StrCat("state = 2 AND lease_expires_ms < ", kNowMs); break;
    case Stale::kCancelOverdue:
      where = absl::StrCat("state = 2 AND cancel_requested AND cancel_deadline_ms < ", kNowMs);
      break;
    case Stale::kHeldByWorker:
      where = "state = 2 AND lease_worker = $2";
      params.Add(worker_id);
      break;
    case Stale::kDeadlinePassed:
      where = absl::StrCat("state IN (1, 2) AND NOT cancel_requested AND deadline_ms < ", kNowMs);
      break;
  }
  std::vector<LeaseRow> changed_rows;
  absl::Status status = InTransaction([&](PGconn* conn) -> absl::Status {
    changed_rows.clear();
    absl::StatusOr<PgResult> locked = PgExec(
        conn,
        absl::StrCat("SELECT ", kPgRowColumns, " FROM jobs WHERE ", where, " ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED"),
        params);
    if (!locked.ok()) return locked.status();
    if (locked->rows() == 0) return absl::OkStatus();
    absl::StatusOr<int64_t> now = DbNowMs(conn);
    if (!now.ok()) return now.status();
    for (int i = 0; i < locked->rows(); ++i) {
      absl::StatusOr<LeaseRow> row = ParsePgRow(*locked, i);
      if (!row.ok()) return row.status();
      std::vector<JobEvent> events;
      if (!update(*now, &*row, &events)) continue;
      absl::Status written = WritePgRow(conn, *row, &events);
      if (!written.ok()) return written;
      changed_rows.push_back(std::move(*row));
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return changed_rows;
}

absl::StatusOr<std::vector<LeaseRow>> PostgresJobStore::UpdateFollowers(int limit, const FollowerUpdate& update) {
  std::vector<LeaseRow> changed_rows;
  absl::Status status = InTransaction([&](PGconn* conn) -> absl::Status {
    changed_rows.clear();
    // kPgRowColumns' columns of the follower f, then the leader's job.
    absl::StatusOr<PgResult> locked = PgExec(
        conn,
        "SELECT f.seq, f.job, COALESCE(f.lease_id, ''), COALESCE(f.lease_worker, ''), "
        "COALESCE(f.lease_expires_ms, 0), f.cancel_requested, COALESCE(f.cancel_deadline_ms, 0), l.job "
        "FROM jobs f JOIN jobs l ON l.id = f.follows "
        "WHERE f.follows <> '' AND f.state IN (1, 2) AND l.state <> f.state "
        "ORDER BY f.seq LIMIT $1 FOR UPDATE OF f SKIP LOCKED",
        PgParams().Add(static_cast<int64_t>(limit)));
    if (!locked.ok()) return locked.status();
    if (locked->rows() == 0) return absl::OkStatus();
    absl::StatusOr<int64_t> now = DbNowMs(conn);
    if (!now.ok()) return now.status();
    for (int i = 0; i < locked->rows(); ++i) {
      absl::StatusOr<LeaseRow> row = ParsePgRow(*locked, i);
      if (!row.ok()) return row.status();
      quark::v1::Job leader;
      if (!leader.ParseFromString(locked->Bytes(i, 7))) {
        return absl::DataLossError(absl::StrCat("job store: unreadable leader of job ", row->job.id()));
      }
      std::vector<JobEvent> events;
      if (!update(*now, leader, &*row, &events)) continue;
      absl::Status written = WritePgRow(conn, *row, &events);
      if (!written.ok()) return written;
      changed_rows.push_back(std::move(*row));
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return changed_rows;
}

absl::StatusOr<int64_t> PostgresJobStore::CountInState(JobState state, const std::string& tenant) {
  int64_t count = 0;
  absl::Status status = WithConnection([&](PGconn* conn) -> absl::Status {
    absl::StatusOr<PgResult> result =
        tenant.empty() ? PgExec(conn, "SELECT COUNT(*) FROM jobs WHERE state = $1 AND follows = ''",
                                PgParams().Add(static_cast<int64_t>(state)))
                       : PgExec(conn, "SELECT COUNT(*) FROM jobs WHERE state = $1 AND tenant = $2 AND follows = ''",
                                PgParams().Add(static_cast<int64_t>(state)).Add(tenant));
    if (!result.ok()) return result.status();
    count = result->Int(0, 0);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return count;
}

}  // namespace quark::server
