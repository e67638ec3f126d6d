// JobStore and SharedJobQueue on PostgreSQL (libpq), for several quarkd replicas on one database
// (--store postgres://...). Commits notify the channels quark_events ("JOB_ID FIRST_SEQUENCE") and quark_queue
// (a job became QUEUED) so peers wake at once; the tables stay the source of truth.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/store/job_store.h"
#include "server/store/pg_util.h"
#include "server/store/shared_job_queue.h"

namespace quark::server {

inline constexpr char kEventsChannel[] = "quark_events";
inline constexpr char kQueueChannel[] = "quark_queue";

/// Thread-safe: a small pool of connections, one per call in flight; every mutating call is one transaction,
/// retried on serialization failures and deadlocks. A lost connection is re-opened on its next use.
class PostgresJobStore : public JobStore, public SharedJobQueue {
 public:
  /// Connects (`dsn`: a libpq URI or key=value string) and runs the schema migrations, one replica at a time
  /// (an advisory lock). UNAVAILABLE naming the redacted DSN when the database cannot be reached.
  static absl::StatusOr<std::unique_ptr<PostgresJobStore>> Open(const std::string& dsn, int connections = 4);
  ~PostgresJobStore() override;

  // JobStore
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

  // SharedJobQueue
  absl::StatusOr<std::optional<LeaseRow>> ClaimNext(const std::string& worker_id, int max_held,
                                                    const RowUpdate& update,
                                                    const std::map<std::string, int64_t>& tenant_limits = {},
                                                    const WorkerCapacity& worker = {},
                                                    std::vector<MemoryPassOver>* passed_over = nullptr) override;
  absl::StatusOr<LeaseRow> UpdateJobRow(const std::string& job_id, const RowUpdate& update) override;
  absl::StatusOr<LeaseRow> UpdateLeasedRow(const std::string& lease_id, const RowUpdate& update) override;
  absl::StatusOr<bool> RenewLease(const std::string& lease_id, int64_t ttl_ms) override;
  absl::StatusOr<std::vector<LeaseRow>> UpdateStaleRows(Stale which, const std::string& worker_id, int limit,
                                                        const RowUpdate& update) override;
  absl::StatusOr<int64_t> CountInState(quark::v1::JobState state, const std::string& tenant) override;
  absl::StatusOr<std::vector<LeaseRow>> UpdateFollowers(int limit, const FollowerUpdate& update) override;

  /// Called on the listener thread for every notification on kEventsChannel / kQueueChannel.
  using NotifyCallback = std::function<void(const std::string& channel, const std::string& payload)>;
  /// Starts a thread that LISTENs on both channels with its own connection, reconnecting with backoff;
  /// `on_connected` runs after every (re)connection (notifications may have been missed meanwhile).
  void StartListening(NotifyCallback on_notify, std::function<void()> on_connected);
  void StopListening();

 private:
  class Pool;
  explicit PostgresJobStore(std::string dsn, std::unique_ptr<Pool> pool);
  /// Runs `body` in a transaction on a pooled connection; retried when ABORTED (serialization, deadlock) or when
  /// the connection was lost before anything was committed.
  absl::Status InTransaction(const std::function<absl::Status(PGconn*)>& body);
  absl::Status WithConnection(const std::function<absl::Status(PGconn*)>& body);
  /// WithConnection for a `body` that runs one read-only query: when it fails because the pooled connection was dead
  /// (PostgreSQL restarted since it was last used, which libpq learns only from a failed query), the connection is
  /// reset and `body` runs once more. Writes never take this path: their failure may be ambiguous.
  absl::Status WithReadConnection(const std::function<absl::Status(PGconn*)>& body);
  /// Runs a `SELECT seq, job` with three integer parameters (retention's candidate lists).
  absl::StatusOr<std::vector<StoredJob>> ScanJobs(const std::string& sql, int64_t a, int64_t b, int64_t c);
  absl::Status UpdateLockedRow(PGconn* conn, const std::string& select_sql, const PgParams& params,
                               const RowUpdate& update, LeaseRow* out, bool* found, bool* changed);
  void ListenLoop();

  const std::string dsn_;
  std::unique_ptr<Pool> pool_;
  std::thread listener_;
  std::atomic<bool> stop_listening_{false};
  NotifyCallback on_notify_;
  std::function<void()> on_connected_;
};

/// Writes a job row and its lease columns, its attempts and `events` (sequence numbers assigned after the
/// job's last), and queues the notifications, inside the caller's transaction. The row must be locked.
absl::Status WritePgRow(PGconn* conn, const LeaseRow& row, std::vector<quark::v1::JobEvent>* events);

/// Parses the lease columns selected by kPgRowColumns into a LeaseRow.
absl::StatusOr<LeaseRow> ParsePgRow(const PgResult& result, int row);

/// WorkerFitsJob (worker_fit.h) on the jobs table's columns (gpus, host_memory_bytes, gpu_memory_bytes; 0 =
/// unknown): a condition for a WHERE clause, the worker's announced numbers inlined (integers, nothing quoted).
std::string PgWorkerFitSql(const WorkerCapacity& worker);
/// The memory half of PgWorkerFitSql ("TRUE" for a worker that announced no memory).
std::string PgMemoryFitSql(const WorkerCapacity& worker);

/// The database clock in milliseconds since the epoch (leases and deadlines run on it, never a replica's).
inline constexpr char kPgNowMs[] = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// The columns ParsePgRow reads, in its order.
inline constexpr char kPgRowColumns[] =
    "seq, job, COALESCE(lease_id, ''), COALESCE(lease_worker, ''), COALESCE(lease_expires_ms, 0), "
    "cancel_requested, COALESCE(cancel_deadline_ms, 0)";

}  // namespace quark::server
