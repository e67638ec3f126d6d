// Live fan-out of job events to WatchJob streams (the durable log is the store's events table).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "quark/v1/service.pb.h"

namespace quark::server {

/// Thread-safe. Callbacks run on the publisher's thread under the hub's lock, so they must not block and
/// must not call back into the hub; once Unsubscribe returns, the callback will not run again.
class EventHub {
 public:
  using Callback = std::function<void(const quark::v1::JobEvent&)>;

  /// Returns a subscription id (never 0).
  uint64_t Subscribe(const std::string& job_id, Callback callback);
  void Unsubscribe(uint64_t id);
  void Publish(const quark::v1::JobEvent& event);
  /// Live subscriptions (for tests and shutdown).
  int Size() const;
  /// Whether anyone watches `job_id`, and every watched job (EventRelay reads only those from the store).
  bool HasSubscribers(const std::string& job_id) const;
  std::vector<std::string> WatchedJobs() const;

 private:
  struct Subscription {
    std::string job_id;
    Callback callback;
  };
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Subscription> subscriptions_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, uint64_t> by_job_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quark::server
