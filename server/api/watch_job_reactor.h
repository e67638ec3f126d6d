// WatchJob: replays a job's event log from the store after `after_sequence`, then streams live events until
// the job reaches a final state. One write in flight; while it is, the newest progress event replaces an
// older pending one (state and log events are never dropped). Finishes exactly once; ends on OnCancel, or on
// Revoke (its caller's token was removed from the tokens file).
#pragma once

#include <grpcpp/support/server_callback.h>

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "quark/v1/service.pb.h"
#include "server/scheduler/event_hub.h"
#include "server/store/job_store.h"

namespace quark::server {

class WatchJobReactor : public grpc::ServerWriteReactor<quark::v1::JobEvent> {
 public:
  /// Starts at once (store reads happen here, on the handler's thread). `store` and `hub` outlive the server.
  /// With `tenant` set, a job of another tenant is NOT_FOUND, exactly as a missing one.
  /// `on_done` (may be empty) runs in OnDone, just before the reactor deletes itself.
  WatchJobReactor(JobStore* store, EventHub* hub, const quark::v1::WatchJobRequest& request,
                  std::optional<std::string> tenant = std::nullopt,
                  std::function<void(WatchJobReactor*)> on_done = nullptr);
  /// A reactor that only finishes with `refusal` (authentication or authorization failed).
  explicit WatchJobReactor(const absl::Status& refusal);

  /// Ends the stream with `status` (no-op once finished). Any thread; the reactor must not have reached OnDone.
  void Revoke(const grpc::Status& status);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void Start(const quark::v1::WatchJobRequest& request, const std::optional<std::string>& tenant);
  void OnLiveEvent(const quark::v1::JobEvent& event);
  void EnqueueLocked(const quark::v1::JobEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_ = nullptr;
  EventHub* const hub_ = nullptr;
  const std::function<void(WatchJobReactor*)> on_done_;
  uint64_t subscription_ = 0;  // written before any reaction can run

  absl::Mutex mu_;
  std::deque<quark::v1::JobEvent> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<quark::v1::JobEvent> early_live_ ABSL_GUARDED_BY(mu_);  // live events seen during the replay
  quark::v1::JobEvent in_flight_ ABSL_GUARDED_BY(mu_);
  bool replayed_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool final_seen_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int64_t last_sequence_ ABSL_GUARDED_BY(mu_) = 0;  // highest sequence queued or written
};

}  // namespace quark::server
