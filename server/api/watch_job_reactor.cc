#include "server/api/watch_job_reactor.h"

#include "absl/strings/str_cat.h"
#include "server/api/status_util.h"
#include "server/scheduler/job_scheduler.h"

namespace quark::server {
namespace {

constexpr int kReplayBatch = 1000;

bool IsFinalEvent(const quark::v1::JobEvent& event) {
  return event.event_case() == quark::v1::JobEvent::kState && IsFinal(event.state());
}

}  // namespace

WatchJobReactor::WatchJobReactor(JobStore* store, EventHub* hub, const quark::v1::WatchJobRequest& request,
                                 std::optional<std::string> tenant, std::function<void(WatchJobReactor*)> on_done)
    : store_(store), hub_(hub), on_done_(std::move(on_done)) {
  Start(request, tenant);
}

WatchJobReactor::WatchJobReactor(const absl::Status& refusal) {
  absl::MutexLock lock(&mu_);
  MaybeFinishLocked(ToGrpcStatus(refusal));
}

void WatchJobReactor::Start(const quark::v1::WatchJobRequest& request, const std::optional<std::string>& tenant) {
  if (request.id().empty() || request.after_sequence() < 0) {
    absl::MutexLock lock(&mu_);
    MaybeFinishLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                   request.id().empty() ? "id: required" : "after_sequence: must not be negative"));
    return;
  }
  absl::StatusOr<quark::v1::Job> job = store_->GetJob(request.id());
  if (job.ok() && tenant.has_value() && job->tenant() != *tenant) job = JobNotFoundError(request.id());
  if (!job.ok()) {
    absl::MutexLock lock(&mu_);
    MaybeFinishLocked(ToGrpcStatus(job.status()));
    return;
  }
  // Subscribe before reading the log so no event can fall between the replay and the live stream.
  subscription_ = hub_->Subscribe(request.id(), [this](const quark::v1::JobEvent& event) { OnLiveEvent(event); });
  int64_t after = request.after_sequence();
  while (true) {
    absl::StatusOr<std::vector<quark::v1::JobEvent>> batch = store_->ListEvents(request.id(), after, kReplayBatch);
    absl::MutexLock lock(&mu_);
    if (!batch.ok()) {
      MaybeFinishLocked(ToGrpcStatus(batch.status()));
      return;
    }
    for (const quark::v1::JobEvent& event : *batch) EnqueueLocked(event);
    if (!batch->empty()) after = batch->back().sequence();
    if (static_cast<int>(batch->size()) < kReplayBatch) break;
  }
  absl::StatusOr<quark::v1::Job> now = store_->GetJob(request.id());
  absl::MutexLock lock(&mu_);
  replayed_ = true;
  for (const quark::v1::JobEvent& event : early_live_) EnqueueLocked(event);
  early_live_.clear();
  // A job final before the replay read has every event in the store already.
  if (now.ok() && IsFinal(now->state())) final_seen_ = true;
  MaybeWriteLocked();
}

void WatchJobReactor::OnLiveEvent(const quark::v1::JobEvent& event) {
  absl::MutexLock lock(&mu_);
  if (finished_) return;
  if (!replayed_) {
    early_live_.push_back(event);
    return;
  }
  EnqueueLocked(event);
  MaybeWriteLocked();
}

void WatchJobReactor::EnqueueLocked(const quark::v1::JobEvent& event) {
  if (event.sequence() <= last_sequence_) return;  // already replayed
  last_sequence_ = event.sequence();
  if (IsFinalEvent(event)) final_seen_ = true;
  bool is_progress = event.event_case() == quark::v1::JobEvent::kProgress;
  // A slow reader (or a replay) gets the newest progress of each phase, not every step; a phase change is
  // never coalesced away, so every watcher sees every phase.
  if (is_progress && !pending_.empty() && pending_.back().event_case() == quark::v1::JobEvent::kProgress &&
      pending_.back().progress().phase() == event.progress().phase()) {
    pending_.back() = event;
    return;
  }
  pending_.push_back(event);
}

void WatchJobReactor::MaybeWriteLocked() {
  if (writing_ || finished_) return;
  if (pending_.empty()) {
    if (final_seen_) MaybeFinishLocked(grpc::Status::OK);
    return;
  }
  in_flight_ = std::move(pending_.front());
  pending_.pop_front();
  writing_ = true;
  StartWrite(&in_flight_);
}

void WatchJobReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) {
    MaybeFinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "WatchJob: write to the client failed"));
    return;
  }
  MaybeWriteLocked();
}

void WatchJobReactor::Revoke(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  MaybeFinishLocked(status);
}

void WatchJobReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  MaybeFinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "WatchJob cancelled"));
}

void WatchJobReactor::MaybeFinishLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  Finish(status);
}

void WatchJobReactor::OnDone() {
  // After Unsubscribe returns no hub callback can be running on this reactor.
  if (subscription_ != 0) hub_->Unsubscribe(subscription_);
  if (on_done_) on_done_(this);
  delete this;
}

}  // namespace quark::server
