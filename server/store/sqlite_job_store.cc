#include "server/store/sqlite_job_store.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "server/store/audit_retention.h"
#include "server/store/job_store_schema.h"

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;
using google::protobuf::util::TimeUtil;

constexpr int kScanBatch = 256;

bool Matches(const JobFilter& filter, const Job& job) {
  if (filter.tenant.has_value() && job.tenant() != *filter.tenant) return false;
  if (!filter.states.empty() &&
      std::find(filter.states.begin(), filter.states.end(), job.state()) == filter.states.end()) {
    return false;
  }
  for (const auto& [key, value] : filter.labels) {
    auto it = job.spec().labels().find(key);
    if (it == job.spec().labels().end() || it->second != value) return false;
  }
  return true;
}

}  // namespace

absl::Status JobNotFoundError(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("job \"", id, "\" not found"));
}

absl::StatusOr<Job> ParseStoredJob(const std::string& bytes, const std::string& where) {
  Job job;
  if (!job.ParseFromString(bytes)) return absl::DataLossError(absl::StrCat("job store: unreadable job row ", where));
  return job;
}

std::string ScopedRequestId(const std::string& tenant, const std::string& request_id) {
  // A tenant name never holds '\x1f' (security_config.h), so no two tenants' keys can meet.
  return tenant.empty() ? request_id : absl::StrCat(tenant, "\x1f", request_id);
}

std::string PresetLabel(const quark::v1::JobSpec& spec) {
  return spec.quantization_case() == quark::v1::JobSpec::kPreset ? spec.preset() : std::string("custom");
}

SqliteJobStore::SqliteJobStore(SqliteDb db, Statements statements)
    : db_(std::move(db)), stmts_(std::move(statements)) {}

absl::StatusOr<SqliteJobStore::Statements> SqliteJobStore::PrepareAll(sqlite3* db) {
  Statements s;
  struct Entry {
    Statement* target;
    const char* sql;
  };
  const Entry entries[] = {
      {&s.insert_job,
       "INSERT INTO jobs (id, request_id, state, priority, preset, created_unix_ms, job, tenant, content_key, gpus, "
       "host_memory_bytes, gpu_memory_bytes) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"},
      {&s.update_job, "UPDATE jobs SET state = ?, priority = ?, job = ? WHERE id = ?"},
      {&s.get_job, "SELECT job FROM jobs WHERE id = ?"},
      {&s.get_by_request, "SELECT seq, job FROM jobs WHERE request_id = ?"},
      {&s.max_sequence, "SELECT COALESCE(MAX(sequence), 0) FROM job_events WHERE job_id = ?"},
      {&s.insert_event, "INSERT INTO job_events (job_id, sequence, event) VALUES (?,?,?)"},
      {&s.list_events, "SELECT event FROM job_events WHERE job_id = ? AND sequence > ? ORDER BY sequence LIMIT ?"},
      {&s.upsert_attempt,
       // An upsert, not INSERT OR REPLACE: its delete would fire no trigger and the quota would count the row twice.
       "INSERT INTO job_attempts (job_id, number, worker_id, started_unix_ms, ended_unix_ms, error) "
       "VALUES (?,?,?,?,?,?) ON CONFLICT (job_id, number) DO UPDATE SET worker_id = excluded.worker_id, "
       "started_unix_ms = excluded.started_unix_ms, ended_unix_ms = excluded.ended_unix_ms, error = excluded.error"},
      {&s.list_page, "SELECT seq, job FROM jobs WHERE seq < ? ORDER BY seq DESC LIMIT ?"},
      {&s.load_state, "SELECT seq, job FROM jobs WHERE state = ? ORDER BY seq"},
      {&s.count, "SELECT state, preset, COUNT(*) FROM jobs GROUP BY state, preset"},
      {&s.insert_audit, "INSERT INTO audit_log (time_unix_ms, tenant, record) VALUES (?,?,?)"},
      {&s.expire_audit, "DELETE FROM audit_log WHERE sequence <= ?"},
      {&s.list_audit, "SELECT sequence, record FROM audit_log WHERE sequence > ? ORDER BY sequence LIMIT ?"},
      {&s.list_audit_tenant,
       "SELECT sequence, record FROM audit_log WHERE sequence > ? AND tenant = ? ORDER BY sequence LIMIT ?"},
      // SUCCEEDED (3) first, then QUEUED/RUNNING (1, 2); newest first in each.
      {&s.by_content_key,
       "SELECT seq, job FROM jobs WHERE tenant = ? AND content_key = ? AND state IN (1, 2, 3) "
       "ORDER BY state = 3 DESC, seq DESC LIMIT 1"},
  };
  for (const Entry& entry : entries) {
    absl::StatusOr<Statement> stmt = Prepare(db, entry.sql);
    if (!stmt.ok()) return stmt.status();
    *entry.target = std::move(*stmt);
  }
  return s;
}

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const std::string& path) {
  absl::StatusOr<SqliteDb> db = OpenSqlite(path);
  if (!db.ok()) return db.status();
  absl::Status migrated = MigrateJobStore(db->get());
  if (!migrated.ok()) return migrated;
  absl::StatusOr<Statements> statements = PrepareAll(db->get());
  if (!statements.ok()) return statements.status();
  return std::unique_ptr<SqliteJobStore>(new SqliteJobStore(std::move(*db), std::move(*statements)));
}

absl::Status SqliteJobStore::AppendEventsLocked(const std::string& job_id, std::vector<JobEvent>* events) {
  if (events == nullptr || events->empty()) return absl::OkStatus();
  Statement& max = stmts_.max_sequence;
  max.Reset();
  max.Bind(1, job_id);
  absl::StatusOr<bool> row = max.Step();
  if (!row.ok()) return row.status();
  int64_t sequence = *row ? max.ColumnInt(0) : 0;
  max.Reset();
  for (JobEvent& event : *events) {
    event.set_job_id(job_id);
    event.set_sequence(++sequence);
    Statement& insert = stmts_.insert_event;
    insert.Reset();
    insert.Bind(1, job_id).Bind(2, sequence).BindBlob(3, event.SerializeAsString());
    absl::Status status = insert.Run();
    insert.Reset();
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStore::WriteAttemptsLocked(const Job& job) {
  for (const quark::v1::Attempt& attempt : job.attempts()) {
    Statement& upsert = stmts_.upsert_attempt;
    upsert.Reset();
    upsert.Bind(1, job.id()).Bind(2, attempt.number()).Bind(3, attempt.worker_id());
    upsert.Bind(4, TimeUtil::TimestampToMilliseconds(attempt.started_at()));
    if (attempt.has_ended_at()) {
      upsert.Bind(5, TimeUtil::TimestampToMilliseconds(attempt.ended_at()));
    } else {
      upsert.BindNull(5);
    }
    upsert.Bind(6, attempt.error());
    absl::Status status = upsert.Run();
    upsert.Reset();
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<StoredJob>> SqliteJobStore::FindByRequestIdLocked(const std::string& scoped_request_id) {
  Statement& find = stmts_.get_by_request;
  find.Reset();
  find.Bind(1, scoped_request_id);
  absl::StatusOr<bool> row = find.Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    find.Reset();
    return std::optional<StoredJob>();
  }
  StoredJob existing;
  existing.order = find.ColumnInt(0);
  absl::StatusOr<Job> parsed = ParseStoredJob(find.ColumnBlob(1), scoped_request_id);
  find.Reset();
  if (!parsed.ok()) return parsed.status();
  existing.job = std::move(*parsed);
  return std::optional<StoredJob>(std::move(existing));
}

absl::StatusOr<StoredJob> SqliteJobStore::FindByRequestId(const std::string& tenant, const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::optional<StoredJob>> found = FindByRequestIdLocked(ScopedRequestId(tenant, request_id));
  if (!found.ok()) return found.status();
  if (!found->has_value()) return absl::NotFoundError(absl::StrCat("request_id \"", request_id, "\" not found"));
  return std::move(**found);
}

absl::StatusOr<StoredJob> SqliteJobStore::CreateJob(const Job& job, std::vector<JobEvent>* events, bool* created) {
  absl::MutexLock lock(&mu_);
  *created = false;
  if (!job.request_id().empty()) {
    absl::StatusOr<std::optional<StoredJob>> existing =
        FindByRequestIdLocked(ScopedRequestId(job.tenant(), job.request_id()));
    if (!existing.ok()) return existing.status();
    if (existing->has_value()) return std::move(**existing);
  }
  Transaction txn(db_.get());
  absl::Status status = txn.Begin();
  if (!status.ok()) return status;
  Statement& insert = stmts_.insert_job;
  insert.Reset();
  insert.Bind(1, job.id());
  if (job.request_id().empty()) {
    insert.BindNull(2);
  } else {
    insert.Bind(2, ScopedRequestId(job.tenant(), job.request_id()));
  }
  insert.Bind(3, job.state()).Bind(4, job.spec().priority()).Bind(5, PresetLabel(job.spec()));
  insert.Bind(6, TimeUtil::TimestampToMilliseconds(job.created_at())).BindBlob(7, job.SerializeAsString());
  insert.Bind(8, job.tenant()).Bind(9, job.content_key());
  insert.Bind(10, job.spec().resources().gpus()).Bind(11, job.needs_host_memory_bytes());
  insert.Bind(12, job.needs_gpu_memory_bytes());
  status = insert.Run();
  insert.Reset();
  if (!status.ok()) return status;
  StoredJob stored{sqlite3_last_insert_rowid(db_.get()), job};
  status = AppendEventsLocked(job.id(), events);
  if (status.ok()) status = WriteAttemptsLocked(job);
  if (status.ok()) status = txn.Commit();
  if (!status.ok()) return status;
  *created = true;
  return stored;
}

absl::Status SqliteJobStore::UpdateJob(const Job& job, std::vector<JobEvent>* events) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_.get());
  absl::Status status = txn.Begin();
  if (!status.ok()) return status;
  Statement& update = stmts_.update_job;
  update.Reset();
  update.Bind(1, job.state()).Bind(2, job.spec().priority()).BindBlob(3, job.SerializeAsString()).Bind(4, job.id());
  status = update.Run();
  update.Reset();
  if (!status.ok()) return status;
  if (sqlite3_changes(db_.get()) == 0) return absl::NotFoundError(absl::StrCat("job ", job.id(), " not found"));
  status = AppendEventsLocked(job.id(), events);
  if (status.ok()) status = WriteAttemptsLocked(job);
  if (status.ok()) status = txn.Commit();
  return status;
}

absl::StatusOr<Job> SqliteJobStore::GetJobLocked(const std::string& id) {
  Statement& get = stmts_.get_job;
  get.Reset();
  get.Bind(1, id);
  absl::StatusOr<bool> row = get.Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    get.Reset();
    return JobNotFoundError(id);
  }
  absl::StatusOr<Job> job = ParseStoredJob(get.ColumnBlob(0), id);
  get.Reset();
  return job;
}

absl::StatusOr<Job> SqliteJobStore::GetJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return GetJobLocked(id);
}

absl::StatusOr<Job> SqliteJobStore::FindByContentKey(const std::string& tenant, const std::string& key) {
  absl::MutexLock lock(&mu_);
  Statement& find = stmts_.by_content_key;
  find.Reset();
  find.Bind(1, tenant).Bind(2, key);
  absl::StatusOr<bool> row = find.Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    find.Reset();
    return absl::NotFoundError(absl::StrCat("no job with content key ", key));
  }
  absl::StatusOr<Job> job = ParseStoredJob(find.ColumnBlob(1), absl::StrCat("seq ", find.ColumnInt(0)));
  find.Reset();
  return job;
}

absl::StatusOr<std::vector<StoredJob>> SqliteJobStore::LoadJobs(const std::vector<JobState>& states) {
  absl::MutexLock lock(&mu_);
  std::vector<StoredJob> jobs;
  for (JobState state : states) {
    Statement& load = stmts_.load_state;
    load.Reset();
    load.Bind(1, state);
    while (true) {
      absl::StatusOr<bool> row = load.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      absl::StatusOr<Job> job = ParseStoredJob(load.ColumnBlob(1), absl::StrCat("seq ", load.ColumnInt(0)));
      if (!job.ok()) return job.status();
      jobs.push_back(StoredJob{load.ColumnInt(0), std::move(*job)});
    }
    load.Reset();
  }
  std::sort(jobs.begin(), jobs.end(), [](const StoredJob& a, const StoredJob& b) { return a.order < b.order; });
  return jobs;
}

absl::StatusOr<JobPage> SqliteJobStore::ListJobs(const JobFilter& filter, int page_size,
                                                 const std::string& page_token) {
  int64_t cursor = INT64_MAX;
  if (!page_token.empty() && (!absl::SimpleAtoi(page_token, &cursor) || cursor <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("page_token: \"", page_token, "\" is not a token from ListJobs"));
  }
  absl::MutexLock lock(&mu_);
  JobPage page;
  Statement& scan = stmts_.list_page;
  bool exhausted = false;
  PageBytes bytes(filter.max_page_bytes);
  while (static_cast<int>(page.jobs.size()) < page_size && !exhausted && !bytes.full()) {
    scan.Reset();
    scan.Bind(1, cursor).Bind(2, kScanBatch);
    int rows = 0;
    while (static_cast<int>(page.jobs.size()) < page_size && !bytes.full()) {
      absl::StatusOr<bool> row = scan.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      ++rows;
      const int64_t seq = scan.ColumnInt(0);
      absl::StatusOr<Job> job = ParseStoredJob(scan.ColumnBlob(1), absl::StrCat("seq ", seq));
      if (!job.ok()) return job.status();
      const bool matches = Matches(filter, *job);
      if (matches && !bytes.Take(*job)) break;  // this job starts the next page: the cursor stays before it
      cursor = seq;
      if (matches) page.jobs.push_back(std::move(*job));
    }
    exhausted = rows < kScanBatch && static_cast<int>(page.jobs.size()) < page_size && !bytes.full();
  }
  scan.Reset();
  // A full page may be followed by more rows: hand out the cursor; the next call answers an empty page at worst.
  if (!exhausted && cursor > 1) page.next_page_token = absl::StrCat(cursor);
  return page;
}

absl::StatusOr<std::vector<JobEvent>> SqliteJobStore::ListEvents(const std::string& job_id, int64_t after_sequence,
                                                                 int limit) {
  absl::MutexLock lock(&mu_);
  std::vector<JobEvent> events;
  Statement& list = stmts_.list_events;
  list.Reset();
  list.Bind(1, job_id).Bind(2, after_sequence).Bind(3, limit);
  while (true) {
    absl::StatusOr<bool> row = list.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    JobEvent event;
    if (!event.ParseFromString(list.ColumnBlob(0))) {
      list.Reset();
      return absl::DataLossError(absl::StrCat("job store: unreadable event of job ", job_id));
    }
    events.push_back(std::move(event));
  }
  list.Reset();
  return events;
}

absl::StatusOr<std::map<std::pair<JobState, std::string>, int64_t>> SqliteJobStore::CountJobs() {
  absl::MutexLock lock(&mu_);
  std::map<std::pair<JobState, std::string>, int64_t> counts;
  Statement& count = stmts_.count;
  count.Reset();
  while (true) {
    absl::StatusOr<bool> row = count.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    counts[{static_cast<JobState>(count.ColumnInt(0)), count.ColumnText(1)}] = count.ColumnInt(2);
  }
  count.Reset();
  return counts;
}

absl::Status SqliteJobStore::AppendAudit(quark::v1::AuditRecord* record) {
  absl::MutexLock lock(&mu_);
  record->set_sequence(0);
  Statement& insert = stmts_.insert_audit;
  insert.Reset();
  insert.Bind(1, TimeUtil::TimestampToMilliseconds(record->time())).Bind(2, record->tenant());
  insert.BindBlob(3, record->SerializeAsString());
  absl::Status status = insert.Run();
  insert.Reset();
  if (!status.ok()) return status;
  record->set_sequence(sqlite3_last_insert_rowid(db_.get()));
  // The retention rule (audit_retention.h): records kAuditLogMaxRecords below the new one expire.
  if (record->sequence() <= kAuditLogMaxRecords) return absl::OkStatus();
  Statement& expire = stmts_.expire_audit;
  expire.Reset();
  expire.Bind(1, record->sequence() - kAuditLogMaxRecords);
  status = expire.Run();
  expire.Reset();
  return status;
}

absl::StatusOr<std::vector<quark::v1::AuditRecord>> SqliteJobStore::ListAudit(int64_t after_sequence, int limit,
                                                                             const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  Statement& list = tenant.empty() ? stmts_.list_audit : stmts_.list_audit_tenant;
  list.Reset();
  if (tenant.empty()) {
    list.Bind(1, after_sequence).Bind(2, limit);
  } else {
    list.Bind(1, after_sequence).Bind(2, tenant).Bind(3, limit);
  }
  std::vector<quark::v1::AuditRecord> records;
  while (true) {
    absl::StatusOr<bool> row = list.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    quark::v1::AuditRecord& record = records.emplace_back();
    if (!record.ParseFromString(list.ColumnBlob(1))) {
      list.Reset();
      return absl::DataLossError(absl::StrCat("job store: unreadable audit record ", list.ColumnInt(0)));
    }
    record.set_sequence(list.ColumnInt(0));  // the row's, whatever the blob says
  }
  list.Reset();
  return records;
}

}  // namespace quark::server
