#include "server/scheduler/event_hub.h"

namespace quark::server {

uint64_t EventHub::Subscribe(const std::string& job_id, Callback callback) {
  absl::MutexLock lock(&mu_);
  uint64_t id = next_id_++;
  subscriptions_[id] = Subscription{job_id, std::move(callback)};
  by_job_.emplace(job_id, id);
  return id;
}

void EventHub::Unsubscribe(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = subscriptions_.find(id);
  if (it == subscriptions_.end()) return;
  auto [begin, end] = by_job_.equal_range(it->second.job_id);
  for (auto j = begin; j != end; ++j) {
    if (j->second == id) {
      by_job_.erase(j);
      break;
    }
  }
  subscriptions_.erase(it);
}

void EventHub::Publish(const quark::v1::JobEvent& event) {
  absl::MutexLock lock(&mu_);
  auto [begin, end] = by_job_.equal_range(event.job_id());
  for (auto it = begin; it != end; ++it) subscriptions_[it->second].callback(event);
}

int EventHub::Size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(subscriptions_.size());
}

bool EventHub::HasSubscribers(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  return by_job_.count(job_id) > 0;
}

std::vector<std::string> EventHub::WatchedJobs() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> jobs;
  for (const auto& [job_id, id] : by_job_) {
    if (jobs.empty() || jobs.back() != job_id) jobs.push_back(job_id);
  }
  return jobs;
}

}  // namespace quark::server
