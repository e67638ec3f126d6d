// The durable job store: jobs, their event log and their attempts. SQLite backs it by default
// (sqlite_job_store.h); the interface is what a PostgreSQL store would implement.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  /// and a job with that request id exists, returns that job instead and sets `*created` to false.
  /// The events' sequence numbers are assigned here (1, 2, ...); the stored events are returned in `*events`.
  virtual absl::StatusOr<StoredJob> CreateJob(const quark::v1::Job& job, std::vector<quark::v1::JobEvent>* events,
                                              bool* created) = 0;

  /// Replaces a job's row (and its attempts) and appends `events` to its log, assigning their sequence
  /// numbers, which are written back into `events`. NOT_FOUND when the job does not exist.
  virtual absl::Status UpdateJob(const quark::v1::Job& job, std::vector<quark::v1::JobEvent>* events) = 0;

  /// NOT_FOUND naming the id.
  virtual absl::StatusOr<quark::v1::Job> GetJob(const std::string& id) = 0;

  /// Jobs in any of `states`, oldest first (used to rebuild the queue on start-up).
  virtual absl::StatusOr<std::vector<StoredJob>> LoadJobs(const std::vector<quark::v1::JobState>& states) = 0;

  /// Newest first; page_token is the opaque token of the previous page. INVALID_ARGUMENT for a bad token.
  virtual absl::StatusOr<JobPage> ListJobs(const JobFilter& filter, int page_size, const std::string& page_token) = 0;

  /// Events with sequence > after_sequence, in order, at most `limit`.
  virtual absl::StatusOr<std::vector<quark::v1::JobEvent>> ListEvents(const std::string& job_id,
                                                                      int64_t after_sequence, int limit) = 0;

  /// Number of jobs per (state, preset label), for the metrics gauges at start-up.
  virtual absl::StatusOr<std::map<std::pair<quark::v1::JobState, std::string>, int64_t>> CountJobs() = 0;
};

/// The preset label of a spec: its preset name, or "custom" for an inline Config.
std::string PresetLabel(const quark::v1::JobSpec& spec);

}  // namespace quark::server
