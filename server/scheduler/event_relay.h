// Live events for WatchJob when several replicas write the log: every event reaches the local EventHub by being
// read back from the store, in sequence order, after a poke (a local write, or a peer's NOTIFY). A poke only says
// "look now"; a periodic sweep of the watched jobs reads the log anyway, so a lost notification delays an event
// by at most the sweep interval and loses nothing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "server/scheduler/event_hub.h"
#include "server/store/job_store.h"

namespace quark::server {

/// Thread-safe; one thread reads and publishes. `store` and `hub` must outlive the relay.
class EventRelay {
 public:
  EventRelay(JobStore* store, EventHub* hub, absl::Duration sweep_interval = absl::Seconds(1));
  ~EventRelay();

  /// Job `job_id` has new events from `first_sequence` on (0: unknown).
  void Poke(const std::string& job_id, int64_t first_sequence = 0);
  /// Every watched job may have new events (after the LISTEN connection was re-opened).
  void PokeAll();

 private:
  void Loop();
  void Relay(const std::string& job_id);

  JobStore* const store_;
  EventHub* const hub_;
  const absl::Duration sweep_interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int64_t> poked_;  // job -> smallest first sequence poked (0: unknown)
  bool sweep_ = false;
  bool stop_ = false;
  std::map<std::string, int64_t> published_;  // relay thread only: job -> last sequence published
  std::thread thread_;
};

}  // namespace quark::server
