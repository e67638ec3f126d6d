// Audit records of refused calls (#29 item 4): their action names, and the budget that keeps unauthenticated
// refusals from flooding the store (anyone who can reach the port can make them; their records hold no principal).
#pragma once

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/scheduler/clock.h"

namespace quark::server {

/// The audit action of a refused call of RPC `what`: the action its success is audited under ("SubmitJob" ->
/// "submit", "CancelJob" -> "cancel", "DeleteJob" -> "delete", "DrainWorker" -> "drain_worker", ...), else the
/// RPC's name in snake_case ("ListJobs" -> "list_jobs").
std::string RefusedAction(const std::string& what);

/// Thread-safe. At most `per_window` refusals are recorded one by one in each window of the clock; the others are
/// counted, and the first refusal of a later window reports how many were not recorded (one summary record), so a
/// flood costs the store at most per_window + 1 records a window.
class RefusalAuditBudget {
 public:
  RefusalAuditBudget(Clock* clock, int per_window, absl::Duration window)
      : clock_(clock), per_window_(per_window), window_(window) {}

  struct Decision {
    bool record = false;          // write this refusal's own record
    int64_t not_recorded = 0;     // refusals of earlier windows not recorded: write one summary first (> 0)
    absl::Time not_recorded_since;  // the start of the first such window
  };
  Decision Take();

 private:
  Clock* const clock_;
  const int per_window_;
  const absl::Duration window_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int taken_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time dropped_since_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quark::server
