// The throughputs each registered worker measured at start (WorkerThroughput in its RegisterRequest), kept for
// ValidateConfig's estimates and SubmitJob's fit check. Fed by the WorkerService: Register stores a profile and
// every Lease and Heartbeat marks it seen; a profile not seen for kProfileTtl is dropped (the worker is gone; a
// parked Lease lasts at most 60 s, so a live worker is seen at least that often).
//
// With replicas on PostgreSQL each quarkd knows the workers that registered with it and call it: the scheduler's
// own worker table is per replica too (replicated_scheduler.h), so estimates and the fit check use the workers this
// replica serves, not those of the others.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/estimate/throughput.h"
#include "quark/v1/worker.pb.h"

namespace quark::server {

inline constexpr absl::Duration kProfileTtl = absl::Minutes(2);

struct WorkerProfile {
  std::string worker_id;
  std::vector<std::string> devices;
  bool measured = false;               // false: the worker sent no throughput (the reference rates stand in)
  estimate::Throughput rates;          // every rate positive (unmeasured ones replaced by the reference)
  absl::Time last_seen;
};

/// The estimator's rates from a worker's message: rates it could not measure (0) take the reference value;
/// memory stays as reported (0 = unknown).
estimate::Throughput ThroughputFromProto(const quark::v1::internal::WorkerThroughput& t);

/// Thread-safe.
class WorkerProfiles {
 public:
  void Register(const quark::v1::internal::RegisterRequest& request, absl::Time now = absl::Now());
  void Seen(const std::string& worker_id, absl::Time now = absl::Now());
  /// The workers seen within kProfileTtl of `now`, by id.
  std::vector<WorkerProfile> Live(absl::Time now = absl::Now()) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, WorkerProfile> profiles_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quark::server
