// The durable job store: jobs, their event log and their attempts. SQLite backs it by default
// (sqlite_job_store.h); the interface is what a PostgreSQL store would implement.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "quark/v1/service.pb.h"

namespace quark::server {

/// A job as stored: the proto plus its creation order (queue ties run in this order).
struct StoredJob {
  int64_t order = 0;  // strictly increasing with creation
  quark::v1::Job job;
};

struct JobFilter {
  std::vector<quark::v1::JobState> states;   // empty = all
  std::map<std::string, std::string> labels;  // every label must match
  std::optional<std::string> tenant;          // only this tenant's jobs; unset = every tenant's
  /// A page also ends once its jobs' serialized bytes reach this (a page holds at least one job); 0 = no limit.
  int64_t max_page_bytes = 0;
};

/// The byte budget of one ListJobs page (JobFilter::max_page_bytes). Take() adds a job unless it would take a
/// non-empty page over the budget; from the first job refused on, the page is full (that job starts the next page).
class PageBytes {
 public:
  explicit PageBytes(int64_t max_bytes) : max_bytes_(max_bytes) {}
  bool Take(const quark::v1::Job& job) {
    const int64_t bytes = static_cast<int64_t>(job.ByteSizeLong());
    if (max_bytes_ > 0 && taken_ > 0 && used_ + bytes > max_bytes_) {
      full_ = true;
      return false;
    }
    used_ += bytes;
    ++taken_;
    return true;
  }
  bool full() const { return full_; }

 private:
  const int64_t max_bytes_;
  int64_t used_ = 0;
  int64_t taken_ = 0;
  bool full_ = false;
};

struct JobPage {
  std::vector<quark::v1::Job> jobs;  // newest first
  std::string next_page_token;       // empty on the last page
};

/// Thread-safe. Every mutating call is one transaction: the job row, its attempts and its new events land
/// together or not at all, so a kill -9 at any point leaves a consistent store.
class JobStore {
 public:
  virtual ~JobStore() = default;

  /// Persists a new job (job.id set by the caller) with its first events. When job.request_id is not empty
  /// and a job of the same tenant with that request id exists, returns that job instead and sets `*created`
  /// to false (request ids are per tenant: another tenant's id never finds, nor reveals, this tenant's job).
  /// The events' sequence numbers are assigned here (1, 2, ...); the stored events are returned in `*events`.
  virtual absl::StatusOr<StoredJob> CreateJob(const quark::v1::Job& job, std::vector<quark::v1::JobEvent>* events,
                                              bool* created) = 0;

  /// Replaces a job's row (and its attempts) and appends `events` to its log, assigning their sequence
  /// numbers, which are written back into `events`. NOT_FOUND when the job does not exist.
  virtual absl::Status UpdateJob(const quark::v1::Job& job, std::vector<quark::v1::JobEvent>* events) = 0;

  /// NOT_FOUND naming the id.
  virtual absl::StatusOr<quark::v1::Job> GetJob(const std::string& id) = 0;

  /// The job `tenant` created with `request_id`; NOT_FOUND when there is none.
  virtual absl::StatusOr<StoredJob> FindByRequestId(const std::string& tenant, const std::string& request_id) = 0;

  /// The job `tenant` submitted with content key `key` (Job.content_key) that a new submission may reuse: the
  /// newest SUCCEEDED one, else the newest QUEUED or RUNNING one. NOT_FOUND when there is none; never another
  /// tenant's job.
  virtual absl::StatusOr<quark::v1::Job> FindByContentKey(const std::string& tenant, const std::string& key) = 0;

  /// Jobs in any of `states`, oldest first (used to rebuild the queue on start-up).
  virtual absl::StatusOr<std::vector<StoredJob>> LoadJobs(const std::vector<quark::v1::JobState>& states) = 0;

  /// Newest first; page_token is the opaque token of the previous page. INVALID_ARGUMENT for a bad token.
  virtual absl::StatusOr<JobPage> ListJobs(const JobFilter& filter, int page_size, const std::string& page_token) = 0;

  /// Events with sequence > after_sequence, in order, at most `limit`.
  virtual absl::StatusOr<std::vector<quark::v1::JobEvent>> ListEvents(const std::string& job_id,
                                                                      int64_t after_sequence, int limit) = 0;

  /// Number of jobs per (state, preset label), for the metrics gauges at start-up.
  virtual absl::StatusOr<std::map<std::pair<quark::v1::JobState, std::string>, int64_t>> CountJobs() = 0;

  /// #29 storage quota: the bytes `tenant`'s jobs hold in the store — every job row (its serialized Job, spec
  /// included), every event row and every attempt row (AttemptRowBytes), in any state (cancelled and finished jobs
  /// count until deleted).
  virtual absl::StatusOr<int64_t> TenantStoredBytes(const std::string& tenant) = 0;
  /// Deletes a SUCCEEDED, FAILED or CANCELLED job with its events and attempts in one transaction and returns the
  /// bytes it held (as TenantStoredBytes counts them). NOT_FOUND naming the id; FAILED_PRECONDITION naming the
  /// state for a queued or running job (the state is checked in the same transaction as the delete).
  virtual absl::StatusOr<int64_t> DeleteJob(const std::string& id) = 0;
  /// #29 retention: finished jobs (SUCCEEDED, FAILED, CANCELLED) created before `created_before` whose order is above
  /// `after_order`, oldest first, at most `limit` (the candidates of a retention sweep, which pages with the last
  /// order seen: a job finishes after it is created, so every job finished before a time was created before it).
  virtual absl::StatusOr<std::vector<StoredJob>> ListFinishedJobs(absl::Time created_before, int64_t after_order,
                                                                  int limit) = 0;
  /// #29 retention by count: finished jobs of any tenant that has more than `keep` newer finished jobs (each
  /// tenant keeps its newest `keep`), order above `after_order`, oldest first, at most `limit`.
  virtual absl::StatusOr<std::vector<StoredJob>> ListExcessFinishedJobs(int keep, int64_t after_order, int limit) = 0;
  /// #29 verified dedup: FindByContentKey no longer finds job `id` (its published files changed). The job itself,
  /// its Job.content_key included, stays as it is. OK when the job does not exist.
  virtual absl::Status ForgetContentKey(const std::string& id) = 0;

  /// Appends to the audit log (append-only: the store refuses updates and deletes), assigning record->sequence.
  virtual absl::Status AppendAudit(quark::v1::AuditRecord* record) = 0;
  /// Records with sequence > after_sequence, oldest first, at most `limit`; only `tenant`'s when not empty.
  virtual absl::StatusOr<std::vector<quark::v1::AuditRecord>> ListAudit(int64_t after_sequence, int limit,
                                                                        const std::string& tenant) = 0;
};

/// NOT_FOUND "job \"ID\" not found": the one answer for a missing job and for another tenant's job.
absl::Status JobNotFoundError(const std::string& id);

/// A job row's bytes as a Job; DATA_LOSS naming `where` (the row) when they do not parse.
absl::StatusOr<quark::v1::Job> ParseStoredJob(const std::string& bytes, const std::string& where);

/// The request_id as stored: unique per tenant ("" tenant: the id itself).
std::string ScopedRequestId(const std::string& tenant, const std::string& request_id);

/// FAILED_PRECONDITION "job \"ID\" is STATE: only a finished job can be deleted (cancel it first)".
absl::Status JobNotDeletableError(const std::string& id, quark::v1::JobState state);

/// ListExcessFinishedJobs' query (both stores) with the store's placeholders for keep, after_order and limit.
std::string ExcessFinishedJobsSql(const std::string& keep, const std::string& after_order, const std::string& limit);

/// What an attempt row holds besides its texts: its number and two times, 8 bytes each.
inline constexpr int64_t kAttemptRowFixedBytes = 24;

/// The bytes an attempt row of job `job_id` counts in its tenant's storage quota: the job id, worker id and error
/// as stored (UTF-8 bytes) plus kAttemptRowFixedBytes.
inline int64_t AttemptRowBytes(const std::string& job_id, const quark::v1::Attempt& attempt) {
  return static_cast<int64_t>(job_id.size() + attempt.worker_id().size() + attempt.error().size()) +
         kAttemptRowFixedBytes;
}

/// ListFinishedJobs' query (both stores) with the store's placeholders for created_before (Unix ms), after_order and
/// limit: `SELECT seq, job FROM jobs ...` oldest first.
std::string FinishedJobsSql(const std::string& created_before, const std::string& after_order,
                            const std::string& limit);

/// Whether a job in `state` may be deleted (SUCCEEDED, FAILED, CANCELLED).
bool IsDeletableState(quark::v1::JobState state);

/// The preset label of a spec: its preset name, or "custom" for an inline Config.
std::string PresetLabel(const quark::v1::JobSpec& spec);

}  // namespace quark::server
