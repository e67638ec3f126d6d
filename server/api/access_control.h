// The security side of every RPC handler: who is calling (Authenticator), may they (role), which jobs they see
// (tenant), which URIs and quotas apply to them (TenantPolicy), and the audit log of what they changed.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"
#include "server/api/refusal_audit.h"
#include "server/metrics/server_metrics.h"
#include "server/scheduler/clock.h"
#include "server/scheduler/job_scheduler.h"
#include "server/security/authenticator.h"
#include "server/store/job_store.h"

namespace grpc {
class ServerContextBase;
}

namespace quark::server {

/// Unauthenticated refusals recorded one by one per minute (refusal_audit.h).
inline constexpr int kUnauthenticatedAuditsPerMinute = 60;

/// Thread-safe; every pointer must outlive it (metrics may be null).
class AccessControl {
 public:
  AccessControl(const Authenticator* auth, JobStore* store, ServerMetrics* metrics, Clock* clock)
      : auth_(auth), store_(store), metrics_(metrics), clock_(clock) {}

  /// Authenticator::Authorize, with refusals counted in quarkd_auth_denied_total, logged and audited (never the
  /// token): a role refusal under the caller's principal, action RefusedAction(what); an unauthenticated call under
  /// principal "unauthenticated" with the peer, at most kUnauthenticatedAuditsPerMinute one by one a minute, the rest
  /// summed up in one "refused_unauthenticated" record (RefusalAuditBudget).
  absl::StatusOr<Principal> Authorize(const grpc::ServerContextBase& context, Role minimum,
                                      const std::string& what) const;

  /// The job if `principal` may see it; NOT_FOUND exactly as for a missing job otherwise.
  absl::StatusOr<quark::v1::Job> GetVisibleJob(const Principal& principal, const std::string& id) const;
  /// The tenant filter of ListJobs: unset for admins, the principal's tenant otherwise.
  std::optional<std::string> TenantFilter(const Principal& principal) const;

  /// The tenant's model_roots (model, calibration and evaluation URIs) and output_prefixes (output_uri):
  /// PERMISSION_DENIED naming the field. OK when the tenant has no policy or the list is empty.
  absl::Status CheckTenantUris(const Principal& principal, const quark::v1::JobSpec& spec) const;
  absl::Status CheckTenantModelUri(const Principal& principal, const std::string& field, const std::string& uri) const;
  /// The folders quarkd reads a principal's file:// models within (ModelView): its tenant's file:// model_roots as
  /// paths, or `global_roots` when the tenant has none.
  std::vector<std::string> ModelReadRoots(const Principal& principal, const std::vector<std::string>& global_roots) const;
  /// The folders quarkd re-reads a principal's published file:// artifacts within (verified dedup, #29): its
  /// tenant's file:// output_prefixes as paths, or `global_roots` when the tenant has none.
  std::vector<std::string> OutputReadRoots(const Principal& principal,
                                           const std::vector<std::string>& global_roots) const;
  /// The job's tenant and the tenant's queued-jobs quota.
  SubmitOptions SubmitOptionsFor(const Principal& principal) const;
  /// The storage credentials of a job's tenant, for the worker that holds its lease (nullopt: none configured).
  std::optional<quark::v1::internal::StorageCredentials> StorageCredentialsFor(const std::string& tenant) const;

  /// Appends an audit record (action "submit", "cancel", ...; outcome from `status`). Failures are logged.
  void Audit(const Principal& principal, const std::string& action, const std::string& target,
             const absl::Status& status, const std::string& detail) const;

  const Authenticator* authenticator() const { return auth_; }

 private:
  void AuditRefusal(const grpc::ServerContextBase& context, const std::string& what, const absl::Status& status) const;
  std::vector<std::string> FileRoots(const Principal& principal, std::vector<std::string> TenantPolicy::*list,
                                     const std::vector<std::string>& global_roots) const;

  const Authenticator* const auth_;
  JobStore* const store_;
  ServerMetrics* const metrics_;
  Clock* const clock_;
  mutable RefusalAuditBudget unauthenticated_budget_{clock_, kUnauthenticatedAuditsPerMinute, absl::Minutes(1)};
};

}  // namespace quark::server
