// quark.v1.AdminService: the audit log and worker draining, for the admin role only.
#pragma once

#include "quark/v1/service.grpc.pb.h"
#include "server/api/access_control.h"
#include "server/scheduler/job_scheduler.h"
#include "server/store/job_store.h"

namespace quark::server {

class AdminServiceImpl final : public quark::v1::AdminService::CallbackService {
 public:
  /// Every pointer must outlive the gRPC server.
  AdminServiceImpl(Scheduler* scheduler, JobStore* store, const AccessControl* access)
      : scheduler_(scheduler), store_(store), access_(access) {}

  grpc::ServerUnaryReactor* ListAuditRecords(grpc::CallbackServerContext* context,
                                             const quark::v1::ListAuditRecordsRequest* request,
                                             quark::v1::ListAuditRecordsResponse* response) override;
  grpc::ServerUnaryReactor* DrainWorker(grpc::CallbackServerContext* context,
                                        const quark::v1::DrainWorkerRequest* request,
                                        quark::v1::DrainWorkerResponse* response) override;
  grpc::ServerUnaryReactor* ResumeWorker(grpc::CallbackServerContext* context,
                                         const quark::v1::DrainWorkerRequest* request,
                                         quark::v1::DrainWorkerResponse* response) override;

 private:
  grpc::ServerUnaryReactor* SetDraining(grpc::CallbackServerContext* context, const std::string& worker_id,
                                        bool draining, quark::v1::DrainWorkerResponse* response);

  Scheduler* const scheduler_;
  JobStore* const store_;
  const AccessControl* const access_;
};

}  // namespace quark::server
