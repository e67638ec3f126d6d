#include "server/api/access_control.h"

#include <grpcpp/server_context.h>

#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "absl/time/time.h"
#include "server/api/uri_policy.h"
#include "server/log_text.h"
#include "server/metrics/grpc_metrics_interceptor.h"
#include "server/scheduler/time_util.h"

namespace quark::server {

absl::StatusOr<Principal> AccessControl::Authorize(const grpc::ServerContextBase& context, Role minimum,
                                                   const std::string& what) const {
  absl::StatusOr<Principal> principal = auth_->Authorize(context, minimum, what);
  if (!principal.ok()) {
    grpc::StatusCode code = static_cast<grpc::StatusCode>(principal.status().code());
    if (metrics_ != nullptr) metrics_->auth_denied.WithLabels({StatusCodeName(code)}).Increment();
    log::Get("auth")->info("job=- {} refused: {} peer={}", what, ForLog(std::string(principal.status().message())),
                           ForLog(context.peer()));
    AuditRefusal(context, what, principal.status());
  }
  return principal;
}

void AccessControl::AuditRefusal(const grpc::ServerContextBase& context, const std::string& what,
                                 const absl::Status& status) const {
  if (status.code() == absl::StatusCode::kPermissionDenied) {
    // An authenticated caller refused for its role: attributable, so always recorded (the log is bounded anyway).
    absl::StatusOr<Principal> who = auth_->Authenticate(context);
    if (who.ok()) {
      Audit(*who, RefusedAction(what), "", status, "");
      return;
    }
  }
  Principal nobody;
  nobody.name = "unauthenticated";
  RefusalAuditBudget::Decision decision = unauthenticated_budget_.Take();
  if (decision.not_recorded > 0) {
    Audit(nobody, "refused_unauthenticated", "", absl::UnauthenticatedError(absl::StrCat(
                      decision.not_recorded, " more unauthenticated calls refused since ",
                      absl::FormatTime(absl::RFC3339_sec, decision.not_recorded_since, absl::UTCTimeZone()),
                      " (over ", kUnauthenticatedAuditsPerMinute, " a minute: not recorded one by one)")),
          "");
  }
  if (decision.record) {
    Audit(nobody, RefusedAction(what), "",
          absl::Status(status.code(), absl::StrCat(status.message(), " peer=", context.peer())), "");
  }
}

absl::StatusOr<quark::v1::Job> AccessControl::GetVisibleJob(const Principal& principal, const std::string& id) const {
  absl::StatusOr<quark::v1::Job> job = store_->GetJob(id);
  if (!job.ok()) return job.status();
  if (!principal.SeesAllTenants() && job->tenant() != principal.tenant) return JobNotFoundError(id);
  return job;
}

std::optional<std::string> AccessControl::TenantFilter(const Principal& principal) const {
  if (principal.SeesAllTenants()) return std::nullopt;
  return principal.tenant;
}

absl::Status AccessControl::CheckTenantModelUri(const Principal& principal, const std::string& field,
                                                const std::string& uri) const {
  std::optional<TenantPolicy> policy = auth_->Tenant(principal.tenant);
  if (!policy.has_value() || policy->model_roots.empty()) return absl::OkStatus();
  return UriPolicy::CheckScope(field, uri, policy->model_roots,
                               absl::StrCat("tenant ", principal.tenant, "'s model_roots"));
}

absl::Status AccessControl::CheckTenantUris(const Principal& principal, const quark::v1::JobSpec& spec) const {
  absl::Status status = CheckTenantModelUri(principal, "spec.model_uri", spec.model_uri());
  if (status.ok()) status = CheckTenantModelUri(principal, "spec.calibration.uri", spec.calibration().uri());
  if (status.ok()) status = CheckTenantModelUri(principal, "spec.evaluation.uri", spec.evaluation().uri());
  if (!status.ok()) return status;
  std::optional<TenantPolicy> policy = auth_->Tenant(principal.tenant);
  if (!policy.has_value() || policy->output_prefixes.empty()) return absl::OkStatus();
  return UriPolicy::CheckScope("spec.output_uri", spec.output_uri(), policy->output_prefixes,
                               absl::StrCat("tenant ", principal.tenant, "'s output_prefixes"));
}

std::vector<std::string> AccessControl::FileRoots(const Principal& principal,
                                                 std::vector<std::string> TenantPolicy::*list,
                                                 const std::vector<std::string>& global_roots) const {
  std::vector<std::string> roots;
  if (std::optional<TenantPolicy> policy = auth_->Tenant(principal.tenant)) {
    for (const std::string& root : (*policy).*list) {
      if (std::string path = UriPolicy::FilePath(root); !path.empty()) roots.push_back(path);
    }
  }
  return roots.empty() ? global_roots : roots;
}

std::vector<std::string> AccessControl::ModelReadRoots(const Principal& principal,
                                                      const std::vector<std::string>& global_roots) const {
  return FileRoots(principal, &TenantPolicy::model_roots, global_roots);
}

std::vector<std::string> AccessControl::OutputReadRoots(const Principal& principal,
                                                       const std::vector<std::string>& global_roots) const {
  return FileRoots(principal, &TenantPolicy::output_prefixes, global_roots);
}

SubmitOptions AccessControl::SubmitOptionsFor(const Principal& principal) const {
  SubmitOptions options;
  options.tenant = principal.tenant;
  if (std::optional<TenantPolicy> policy = auth_->Tenant(principal.tenant)) {
    options.max_queued_jobs = policy->max_queued_jobs;
    options.max_stored_bytes = policy->max_stored_bytes;
  }
  return options;
}

std::optional<quark::v1::internal::StorageCredentials> AccessControl::StorageCredentialsFor(
    const std::string& tenant) const {
  if (tenant.empty()) return std::nullopt;
  std::optional<TenantPolicy> policy = auth_->Tenant(tenant);
  if (!policy.has_value() || policy->storage.ByteSizeLong() == 0) return std::nullopt;
  return policy->storage;
}

void AccessControl::Audit(const Principal& principal, const std::string& action, const std::string& target,
                          const absl::Status& status, const std::string& detail) const {
  quark::v1::AuditRecord record;
  *record.mutable_time() = ToTimestamp(clock_->Now());
  record.set_principal(principal.name);
  record.set_tenant(principal.tenant);
  record.set_role(RoleName(principal.role));
  record.set_action(action);
  record.set_target(target);
  record.set_outcome(StatusCodeName(static_cast<grpc::StatusCode>(status.code())));
  record.set_detail(status.ok() ? detail.substr(0, 2048) : std::string(status.message()).substr(0, 2048));
  absl::Status stored = store_->AppendAudit(&record);
  if (!stored.ok()) {
    log::Get("audit")->error("job={} audit record of {} by {} not stored: {}", target.empty() ? "-" : target, action,
                             ForLog(principal.name), ForLog(stored.ToString()));
  }
}

}  // namespace quark::server
