#include "server/api/worker_binding.h"

#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace quark::server {

absl::Status WorkerBindings::Bind(const Principal& principal, const std::string& worker_id, const std::string& what) {
  if (principal.anonymous) return absl::OkStatus();
  if (principal.name != kLocalWorkerPrincipal && IsLocalWorkerId(worker_id)) {
    return absl::PermissionDeniedError(absl::StrCat(what, ": worker_id \"", worker_id.substr(0, 200),
                                                    "\" is reserved for quarkd's local workers; \"", principal.name,
                                                    "\" may not act as it"));
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = owners_.emplace(worker_id, principal.name);
  if (inserted || it->second == principal.name) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(what, ": worker_id \"", worker_id, "\" belongs to another credential; \"",
                                                  principal.name, "\" may not act as it"));
}

bool WorkerBindings::IsLocalWorkerId(const std::string& worker_id) {
  // The id after an optional "<replica>." prefix (worker_pool.h: id_prefix + "local-" + index).
  const size_t dot = worker_id.rfind('.');
  absl::string_view id = absl::string_view(worker_id).substr(dot == std::string::npos ? 0 : dot + 1);
  if (!absl::ConsumePrefix(&id, "local-") || id.empty()) return false;
  // "local-N", or "local-N-HEX" (worker_pool.h's per-start suffix).
  const size_t dash = id.find('-');
  absl::string_view index = id.substr(0, dash);
  if (index.empty()) return false;
  for (char c : index) {
    if (c < '0' || c > '9') return false;
  }
  if (dash == absl::string_view::npos) return true;
  absl::string_view suffix = id.substr(dash + 1);
  if (suffix.empty()) return false;
  for (char c : suffix) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool WorkerBindings::IsLocalWorkerSlot(const std::string& name) {
  const size_t dot = name.rfind('.');
  return IsLocalWorkerId(name) && name.find('-', name.find("local-", dot == std::string::npos ? 0 : dot) + 6) ==
                                      std::string::npos;
}

void WorkerBindings::RecordLease(const std::string& lease_id, const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  if (auto existing = leases_.find(lease_id); existing != leases_.end()) lease_order_.erase(existing->second.sequence);
  uint64_t sequence = next_sequence_++;
  leases_[lease_id] = Lease{worker_id, sequence};
  lease_order_.emplace(sequence, lease_id);
  // The two maps hold the same leases, so the oldest by sequence is always in leases_.
  while (leases_.size() > kMaxLeases) {
    leases_.erase(lease_order_.begin()->second);
    lease_order_.erase(lease_order_.begin());
  }
}

void WorkerBindings::ForgetLease(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  lease_order_.erase(it->second.sequence);
  leases_.erase(it);
}

absl::Status WorkerBindings::CheckLease(const Principal& principal, const std::string& lease_id,
                                        const std::string& worker_id, const std::string& what) const {
  if (principal.anonymous) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto lease = leases_.find(lease_id);
  if (lease == leases_.end()) return absl::OkStatus();
  const std::string& holder = lease->second.worker_id;
  auto owner = owners_.find(holder);
  bool same_principal = owner != owners_.end() && owner->second == principal.name;
  if (same_principal && (worker_id.empty() || worker_id == holder)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, ": lease_id \"", lease_id, "\" is not held by ",
                   worker_id.empty() ? absl::StrCat("a worker of \"", principal.name, "\"")
                                     : absl::StrCat("worker_id \"", worker_id, "\"")));
}

}  // namespace quark::server
