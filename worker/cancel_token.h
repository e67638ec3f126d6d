// Cooperative cancellation of a running job: set by the agent (user cancel, lost lease, shutdown), polled by
// runners between units of work (layers, files), and waitable so sleeps end early.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace quark::worker {

class CancelToken {
 public:
  enum class Reason { kNone, kCancelled, kLeaseLost, kShutdown };

  /// Thread-safe; the first reason wins.
  void Cancel(Reason reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_.load() != Reason::kNone) return;
    reason_.store(reason);
    cv_.notify_all();
  }
  bool IsCancelled() const { return reason_.load() != Reason::kNone; }
  Reason reason() const { return reason_.load(); }

  /// Sleeps up to `timeout`; true when cancelled (at once if already).
  bool WaitFor(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return reason_.load() != Reason::kNone; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<Reason> reason_{Reason::kNone};
};

}  // namespace quark::worker
