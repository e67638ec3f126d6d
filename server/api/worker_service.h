// quark.v1.internal.WorkerService (the quark-worker protocol) on the gRPC callback API. Lease is a long poll:
// its reactor parks in the scheduler until a job is assigned, the wait ends, or the caller goes away.
#pragma once

#include "quark/v1/worker.grpc.pb.h"
#include "server/api/access_control.h"
#include "server/api/worker_binding.h"
#include "server/api/worker_profiles.h"
#include "server/scheduler/job_scheduler.h"

namespace quark::server {

class WorkerServiceImpl final : public quark::v1::internal::WorkerService::CallbackService {
 public:
  /// The longest Lease wait granted, whatever wait_ms asks.
  static constexpr int64_t kMaxLeaseWaitMs = 60000;

  /// Every call needs the worker role (a worker token, quarkd's own local-worker token, or a listed mTLS
  /// identity) when authentication is on. A lease carries the storage credentials of its job's tenant.
  /// A worker id belongs to the credential that first used it, and Heartbeat, ReportProgress and Complete
  /// are refused (PERMISSION_DENIED) on a lease granted to a worker id of another credential
  /// (worker_binding.h).
  /// `profiles` (may be null) keeps each worker's measured throughputs for the estimates (worker_profiles.h).
  WorkerServiceImpl(Scheduler* scheduler, const AccessControl* access, WorkerProfiles* profiles = nullptr)
      : scheduler_(scheduler), access_(access), profiles_(profiles) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const quark::v1::internal::RegisterRequest* request,
                                     quark::v1::internal::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Lease(grpc::CallbackServerContext* context,
                                  const quark::v1::internal::LeaseRequest* request,
                                  quark::v1::internal::LeaseResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const quark::v1::internal::HeartbeatRequest* request,
                                      quark::v1::internal::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* context,
                                           const quark::v1::internal::ReportProgressRequest* request,
                                           quark::v1::internal::ReportProgressResponse* response) override;
  grpc::ServerUnaryReactor* Complete(grpc::CallbackServerContext* context,
                                     const quark::v1::internal::CompleteRequest* request,
                                     quark::v1::internal::CompleteResponse* response) override;

 private:
  absl::StatusOr<Principal> Authorize(const grpc::CallbackServerContext& context, const std::string& what) const;
  /// `status` as it is; a refusal of WorkerBindings (a worker id or lease held by another credential: an
  /// impersonation attempt) is audited first, action "worker_identity", target the worker id or lease id (#29).
  absl::Status AuditImpersonation(const Principal& principal, const std::string& target, const std::string& what,
                                  absl::Status status) const;

  Scheduler* const scheduler_;
  const AccessControl* const access_;
  WorkerProfiles* const profiles_;
  WorkerBindings bindings_;
};

}  // namespace quark::server
