// JobStore on one SQLite file in WAL mode (<data-dir>/quarkd.db).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/store/job_store.h"
#include "server/store/sqlite_util.h"

namespace quark::server {

/// One connection guarded by a mutex; statements prepared once. Opening runs the versioned schema
/// migrations (job_store_schema.h) and recovers from an unclean close through SQLite's WAL.
class SqliteJobStore : public JobStore {
 public:
  /// Opens or creates `path` (a file; its directory must exist).
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(const std::string& path);

  absl::StatusOr<StoredJob> CreateJob(const quark::v1::Job& job, std::vector<quark::v1::JobEvent>* events,
                                      bool* created) override;
  absl::Status UpdateJob(const quark::v1::Job& job, std::vector<quark::v1::JobEvent>* events) override;
  absl::StatusOr<quark::v1::Job> GetJob(const std::string& id) override;
  absl::StatusOr<StoredJob> FindByRequestId(const std::string& tenant, const std::string& request_id) override;
  absl::StatusOr<quark::v1::Job> FindByContentKey(const std::string& tenant, const std::string& key) override;
  absl::StatusOr<std::vector<StoredJob>> LoadJobs(const std::vector<quark::v1::JobState>& states) override;
  absl::StatusOr<JobPage> ListJobs(const JobFilter& filter, int page_size, const std::string& page_token) override;
  absl::StatusOr<std::vector<quark::v1::JobEvent>> ListEvents(const std::string& job_id, int64_t after_sequence,
                                                              int limit) override;
  absl::StatusOr<std::vector<StoredJob>> ListExcessFinishedJobs(int keep, int64_t after_order, int limit) override;
  absl::StatusOr<std::map<std::pair<quark::v1::JobState, std::string>, int64_t>> CountJobs() override;
  absl::StatusOr<int64_t> TenantStoredBytes(const std::string& tenant) override;
  absl::StatusOr<int64_t> DeleteJob(const std::string& id) override;
  absl::StatusOr<std::vector<StoredJob>> ListFinishedJobs(absl::Time created_before, int64_t after_order,
                                                          int limit) override;
  absl::Status ForgetContentKey(const std::string& id) override;
  absl::Status AppendAudit(quark::v1::AuditRecord* record) override;
  absl::StatusOr<std::vector<quark::v1::AuditRecord>> ListAudit(int64_t after_sequence, int limit,
                                                                const std::string& tenant) override;

 private:
  struct Statements {
    Statement insert_job, update_job, get_job, get_by_request, max_sequence, insert_event, list_events,
        upsert_attempt, list_page, load_state, count, insert_audit, expire_audit, list_audit, list_audit_tenant,
        by_content_key;
  };
  SqliteJobStore(SqliteDb db, Statements statements);
  static absl::StatusOr<Statements> PrepareAll(sqlite3* db);
  absl::StatusOr<quark::v1::Job> GetJobLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// std::nullopt when no job has that scoped request id.
  absl::StatusOr<std::optional<StoredJob>> FindByRequestIdLocked(const std::string& scoped_request_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AppendEventsLocked(const std::string& job_id, std::vector<quark::v1::JobEvent>* events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteAttemptsLocked(const quark::v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  SqliteDb db_ ABSL_GUARDED_BY(mu_);
  Statements stmts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quark::server
