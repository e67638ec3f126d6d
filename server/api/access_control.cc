#include "server/api/access_control.h"

#include <grpcpp/server_context.h>

#include "absl/strings/str_cat.h"
#include "core/base/log.h"
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
  }
  return principal;
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

std::vector<std::string> AccessControl::ModelReadRoots(const Principal& principal,
                                                      const std::vector<std::string>& global_roots) const {
  std::vector<std::string> roots;
  if (std::optional<TenantPolicy> policy = auth_->Tenant(principal.tenant)) {
    for (const std::string& root : policy->model_roots) {
      if (std::string path = UriPolicy::FilePath(root); !path.empty()) roots.push_back(path);
    }
  }
  return roots.empty() ? global_roots : roots;
}

SubmitOptions AccessControl::SubmitOptionsFor(const Principal& principal) const {
  SubmitOptions options;
  options.tenant = principal.tenant;
  if (std::optional<TenantPolicy> policy = auth_->Tenant(principal.tenant)) {
    options.max_queued_jobs = policy->max_queued_jobs;
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
