#include "server/api/admin_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/api/request_limits.h"
#include "server/api/status_util.h"

namespace quark::server {
namespace {

constexpr int kDefaultAuditPage = 100;
constexpr int kMaxAuditPage = 1000;

}  // namespace

grpc::ServerUnaryReactor* AdminServiceImpl::ListAuditRecords(grpc::CallbackServerContext* context,
                                                             const quark::v1::ListAuditRecordsRequest* request,
                                                             quark::v1::ListAuditRecordsResponse* response) {
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kAdmin, "ListAuditRecords");
  if (!principal.ok()) return FinishNow(context, principal.status());
  if (request->page_size() < 0 || request->after_sequence() < 0) {
    return FinishNow(context, absl::InvalidArgumentError(request->page_size() < 0
                                                             ? "page_size: must not be negative"
                                                             : "after_sequence: must not be negative"));
  }
  int page_size = request->page_size() == 0 ? kDefaultAuditPage : std::min(request->page_size(), kMaxAuditPage);
  absl::StatusOr<std::vector<quark::v1::AuditRecord>> records =
      store_->ListAudit(request->after_sequence(), page_size, request->tenant());
  if (!records.ok()) return FinishNow(context, records.status());
  for (quark::v1::AuditRecord& record : *records) *response->add_records() = std::move(record);
  response->set_last_sequence(response->records_size() > 0 ? response->records().rbegin()->sequence() : 0);
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* AdminServiceImpl::SetDraining(grpc::CallbackServerContext* context,
                                                        const std::string& worker_name, bool draining,
                                                        quark::v1::DrainWorkerResponse* response) {
  const char* what = draining ? "DrainWorker" : "ResumeWorker";
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kAdmin, what);
  if (!principal.ok()) return FinishNow(context, principal.status());  // audited by Authorize
  if (worker_name.empty() || worker_name.size() > kMaxWorkerIdBytes) {
    return FinishNow(context, absl::InvalidArgumentError("worker_id: required, at most 256 bytes"));
  }
  const std::string worker_id = alias_ ? alias_(worker_name) : worker_name;
  bool registered = scheduler_->SetDraining(worker_id, draining);
  access_->Audit(*principal, draining ? "drain_worker" : "resume_worker", worker_id, absl::OkStatus(),
                 registered ? "registered" : "not registered now");
  response->set_worker_id(worker_id);
  response->set_draining(draining);
  response->set_registered(registered);
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* AdminServiceImpl::DrainWorker(grpc::CallbackServerContext* context,
                                                        const quark::v1::DrainWorkerRequest* request,
                                                        quark::v1::DrainWorkerResponse* response) {
  return SetDraining(context, request->worker_id(), true, response);
}

grpc::ServerUnaryReactor* AdminServiceImpl::ResumeWorker(grpc::CallbackServerContext* context,
                                                         const quark::v1::DrainWorkerRequest* request,
                                                         quark::v1::DrainWorkerResponse* response) {
  return SetDraining(context, request->worker_id(), false, response);
}

}  // namespace quark::server
