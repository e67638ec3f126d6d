#include "server/scheduler/event_relay.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/base/log.h"
#include "server/log_text.h"

namespace quark::server {
namespace {
constexpr int kBatch = 1000;
}  // namespace

EventRelay::EventRelay(JobStore* store, EventHub* hub, absl::Duration sweep_interval)
    : store_(store), hub_(hub), sweep_interval_(sweep_interval) {
  thread_ = std::thread([this] { Loop(); });
}

EventRelay::~EventRelay() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EventRelay::Poke(const std::string& job_id, int64_t first_sequence) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = poked_.emplace(job_id, first_sequence);
    if (!inserted) it->second = (it->second == 0 || first_sequence == 0) ? 0 : std::min(it->second, first_sequence);
  }
  cv_.notify_one();
}

void EventRelay::PokeAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    sweep_ = true;
  }
  cv_.notify_one();
}

void EventRelay::Relay(const std::string& job_id) {
  int64_t after = published_[job_id];
  while (true) {
    absl::StatusOr<std::vector<quark::v1::JobEvent>> events = store_->ListEvents(job_id, after, kBatch);
    if (!events.ok()) {
      log::Get("relay")->warn("job={} events not read: {}", job_id, ForLog(events.status().ToString()));
      return;
    }
    for (const quark::v1::JobEvent& event : *events) hub_->Publish(event);
    if (!events->empty()) after = events->back().sequence();
    published_[job_id] = after;
    if (static_cast<int>(events->size()) < kBatch) return;
  }
}

void EventRelay::Loop() {
  auto interval = std::chrono::microseconds(absl::ToInt64Microseconds(sweep_interval_));
  auto next_sweep = std::chrono::steady_clock::now() + interval;
  while (true) {
    std::map<std::string, int64_t> poked;
    bool sweep = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, next_sweep, [&] { return stop_ || sweep_ || !poked_.empty(); });
      if (stop_) return;
      poked.swap(poked_);
      sweep = sweep_ || std::chrono::steady_clock::now() >= next_sweep;
      sweep_ = false;
    }
    if (sweep) {
      next_sweep = std::chrono::steady_clock::now() + interval;
      std::vector<std::string> watched = hub_->WatchedJobs();
      // Forget jobs nobody watches any more; read every watched one.
      std::map<std::string, int64_t> kept;
      for (const std::string& job_id : watched) kept[job_id] = published_.count(job_id) ? published_[job_id] : 0;
      published_.swap(kept);
      for (const std::string& job_id : watched) poked.emplace(job_id, 0);
    }
    for (const auto& [job_id, first] : poked) {
      if (!hub_->HasSubscribers(job_id)) continue;
      // A job first seen through a poke starts just before the poked events: the watcher replayed the rest.
      if (!published_.count(job_id) && first > 0) published_[job_id] = first - 1;
      Relay(job_id);
    }
  }
}

}  // namespace quark::server
