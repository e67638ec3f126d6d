// quark.v1.AdminService: the audit log and worker draining, for the admin role only.
#pragma once

#include <functional>

#include "quark/v1/service.grpc.pb.h"
#include "server/api/access_control.h"
#include "server/scheduler/job_scheduler.h"
#include "server/store/job_store.h"

namespace quark::server {

class AdminServiceImpl final : public quark::v1::AdminService::CallbackService {
 public:
  /// Maps a worker name of a Drain/Resume request to the worker id (a local worker's slot "local-N" to its
  /// per-start id); null = names are ids.
  using WorkerAlias = std::function<std::string(const std::string&)>;

  /// Every pointer must outlive the gRPC server.
  AdminServiceImpl(Scheduler* scheduler, JobStore* store, const AccessControl* access, WorkerAlias alias = nullptr)
      : scheduler_(scheduler), store_(store), access_(access), alias_(std::move(alias)) {}

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
  const WorkerAlias alias_;
};

}  // namespace quark::server
