// Worker identity bound to the credential that first used it: a worker id belongs to the token (or mTLS
// identity) that registered it, and a lease to the worker id it was granted to. Without this any worker token
// could heartbeat, report on or complete another worker's leases by naming its id or lease id.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/security/security_config.h"

namespace quark::server {

/// Thread-safe. Anonymous principals (authentication off) are never checked nor bound. Bindings live as long as
/// quarkd: a worker id taken over by another token is refused until quarkd restarts (give the new worker
/// another id). Leases granted by another replica are unknown here and are left to that replica's checks
/// (lease ids are unguessable).
class WorkerBindings {
 public:
  /// The most leases remembered; the oldest are forgotten first (leases that died without Complete).
  static constexpr size_t kMaxLeases = 1 << 16;

  /// Binds `worker_id` to `principal` on first sight. PERMISSION_DENIED naming the worker id, `what` ("Lease")
  /// and the principal when another principal holds it, or when it is a local worker id (IsLocalWorkerId) and
  /// `principal` is not quarkd's local workers' (kLocalWorkerPrincipal): those ids are reserved from the start, so
  /// no worker token can register "local-0" before the real local worker does and lock it out.
  absl::Status Bind(const Principal& principal, const std::string& worker_id, const std::string& what);
  /// Whether `worker_id` has the form of quarkd's local workers' ids: "local-N" or "local-N-HEX" (the per-start
  /// suffix), optionally after "<replica>.".
  static bool IsLocalWorkerId(const std::string& worker_id);
  /// Whether `name` is a local worker's slot: "local-N", optionally after "<replica>." (no per-start suffix).
  static bool IsLocalWorkerSlot(const std::string& name);
  /// `lease_id` was granted to `worker_id` (Lease answered).
  void RecordLease(const std::string& lease_id, const std::string& worker_id);
  /// The lease ended (completed or lost).
  void ForgetLease(const std::string& lease_id);
  /// PERMISSION_DENIED naming `what` and the lease when the lease was granted here to a worker id bound to
  /// another principal, or (`worker_id` non-empty: Heartbeat) to another worker id.
  absl::Status CheckLease(const Principal& principal, const std::string& lease_id, const std::string& worker_id,
                          const std::string& what) const;

 private:
  struct Lease {
    std::string worker_id;
    uint64_t sequence = 0;
  };

  mutable absl::Mutex mu_;
  std::map<std::string, std::string> owners_ ABSL_GUARDED_BY(mu_);  // worker id -> principal name
  std::map<std::string, Lease> leases_ ABSL_GUARDED_BY(mu_);        // lease id -> its worker
  std::map<uint64_t, std::string> lease_order_ ABSL_GUARDED_BY(mu_);  // sequence -> lease id, oldest first
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace quark::server
