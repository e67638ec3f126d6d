// Time, injected: the scheduler reads it through Clock so tests move time by hand and never sleep.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace quark::server {

class Clock {
 public:
  virtual ~Clock() = default;
  /// Thread-safe.
  virtual absl::Time Now() = 0;
};

/// The wall clock.
class SystemClock : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  /// A process-wide instance.
  static SystemClock* Get();
};

/// A clock that moves only when told (tests and benchmarks).
class ManualClock : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1700000000)) : now_(start) {}
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quark::server
