#include "server/api/worker_service.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/api/request_limits.h"
#include "server/api/status_util.h"
#include "server/log_text.h"

namespace quark::server {
namespace {

using quark::v1::internal::LeaseResponse;

// A long poll answers this much before the caller's deadline, so the empty answer arrives in time.
constexpr int64_t kDeadlineMarginMs = 200;

absl::Status CheckWorkerId(const std::string& worker_id) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id: required");
  if (worker_id.size() > kMaxWorkerIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("worker_id: ", worker_id.size(), " bytes, more than ", kMaxWorkerIdBytes));
  }
  return absl::OkStatus();
}

// Parks in the scheduler; finishes exactly once, from the scheduler's answer or after OnCancel.
// An answer carrying a lease that the cancelled call could not deliver is handed back when the call is done.
class LeaseReactor : public grpc::ServerUnaryReactor {
 public:
  LeaseReactor(grpc::CallbackServerContext* context, Scheduler* scheduler, const AccessControl* access,
               WorkerBindings* bindings, const std::string& worker_id, absl::Duration wait, LeaseResponse* response)
      : context_(context),
        scheduler_(scheduler),
        access_(access),
        bindings_(bindings),
        worker_id_(worker_id),
        response_(response) {
    uint64_t wait_id = scheduler_->Lease(worker_id, wait, [this](LeaseResponse answer) { OnAnswer(std::move(answer)); });
    absl::MutexLock lock(&mu_);
    if (!answered_) wait_id_ = wait_id;
  }

  void OnCancel() override {
    uint64_t wait_id;
    {
      absl::MutexLock lock(&mu_);
      wait_id = wait_id_;
    }
    // Answers the parked call empty (OnAnswer below), unless a job got there first.
    if (wait_id != 0) scheduler_->CancelLeaseWait(wait_id);
  }

  void OnDone() override {
    // An answer with a lease that never reached the worker (its call was cancelled as it was sent: the worker stopping,
    // the connection lost) leaves a lease nobody holds; it is handed back now instead of when it expires.
    if (!answered_lease_.empty() && context_->IsCancelled()) HandBackUndelivered();
    delete this;
  }

 private:
  void OnAnswer(LeaseResponse answer) {
    {
      absl::MutexLock lock(&mu_);
      if (answered_) return;
      answered_ = true;
      wait_id_ = 0;
    }
    // Only the worker holding the lease learns the tenant's storage keys; they are never stored with the job.
    if (!answer.lease_id().empty()) {
      bindings_->RecordLease(answer.lease_id(), worker_id_);
      if (auto credentials = access_->StorageCredentialsFor(answer.job().tenant())) {
        *answer.mutable_storage_credentials() = *std::move(credentials);
      }
      // The worker holds the job to its tenant's roots where it opens the files (names may change after submit).
      if (std::optional<TenantPolicy> policy = access_->authenticator()->Tenant(answer.job().tenant())) {
        quark::v1::internal::TenantRoots* roots = answer.mutable_tenant_roots();
        for (const std::string& root : policy->model_roots) roots->add_model_roots(root);
        for (const std::string& prefix : policy->output_prefixes) roots->add_output_prefixes(prefix);
      }
    }
    answered_lease_ = answer.lease_id();
    answered_job_ = answer.job().id();
    *response_ = std::move(answer);
    // Last touch of this reactor: OnDone (and delete) may follow at once on another thread.
    Finish(grpc::Status::OK);
  }

  void HandBackUndelivered() {
    quark::v1::internal::CompleteRequest back;
    back.set_lease_id(answered_lease_);
    back.set_job_id(answered_job_);
    back.set_handed_back(true);
    back.set_error(absl::StrCat("handed back: the answer to worker ", worker_id_,
                                "'s Lease call did not reach it (the call was cancelled)"));
    absl::Status status = scheduler_->Complete(back);
    bindings_->ForgetLease(answered_lease_);
    log::Get("scheduler")->warn("job={} worker={} lease {} was never delivered: {}", answered_job_, ForLog(worker_id_),
                                answered_lease_, status.ok() ? "requeued" : ForLog(status.ToString()));
  }

  grpc::CallbackServerContext* const context_;  // valid until OnDone returns
  Scheduler* const scheduler_;
  const AccessControl* const access_;
  WorkerBindings* const bindings_;
  const std::string worker_id_;
  LeaseResponse* const response_;
  std::string answered_lease_;  // written before Finish, read in OnDone, which follows it
  std::string answered_job_;
  absl::Mutex mu_;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t wait_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

// Rates are used as divisors and memory as limits: each must be a finite, non-negative number.
static absl::Status CheckThroughput(const quark::v1::internal::WorkerThroughput& t) {
  const std::pair<const char*, double> values[] = {
      {"gemm_gflops", t.gemm_gflops()},
      {"cholesky_gflops", t.cholesky_gflops()},
      {"fake_quant_bytes_per_s", t.fake_quant_bytes_per_s()},
      {"float_codes_bytes_per_s", t.float_codes_bytes_per_s()},
      {"disk_write_bytes_per_s", t.disk_write_bytes_per_s()},
      {"disk_read_bytes_per_s", t.disk_read_bytes_per_s()},
      {"host_memory_bytes", static_cast<double>(t.host_memory_bytes())},
      {"gpu_memory_bytes", static_cast<double>(t.gpu_memory_bytes())},
      {"threads", static_cast<double>(t.threads())}};
  for (const auto& [name, value] : values) {
    if (!(value >= 0 && value < 1e30)) {
      return absl::InvalidArgumentError(absl::StrCat("throughput.", name, ": ", value, " is not a finite non-negative number"));
    }
  }
  if (!t.device().empty() && t.device() != "cpu" && t.device() != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("throughput.device: \"", t.device().substr(0, 64), "\" is not cpu or cuda"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Principal> WorkerServiceImpl::Authorize(const grpc::CallbackServerContext& context,
                                                       const std::string& what) const {
  return access_->Authorize(context, Role::kWorker, what);
}

absl::Status WorkerServiceImpl::AuditImpersonation(const Principal& principal, const std::string& target,
                                                   const std::string& what, absl::Status status) const {
  if (status.code() == absl::StatusCode::kPermissionDenied) access_->Audit(principal, "worker_identity", target, status, what);
  return status;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Register(grpc::CallbackServerContext* context,
                                                      const quark::v1::internal::RegisterRequest* request,
                                                      quark::v1::internal::RegisterResponse* response) {
  absl::StatusOr<Principal> principal = Authorize(*context, "Register");
  absl::Status status = principal.status();
  if (status.ok()) status = CheckWorkerId(request->worker_id());
  if (status.ok()) {
    status = AuditImpersonation(*principal, request->worker_id(), "Register",
                                bindings_.Bind(*principal, request->worker_id(), "Register"));
  }
  if (status.ok() && (request->slots() < 0 || request->slots() > 1024)) {
    status = absl::InvalidArgumentError(absl::StrCat("slots: ", request->slots(), " is not in 0..1024"));
  }
  if (status.ok()) status = CheckThroughput(request->throughput());
  if (status.ok()) *response = scheduler_->Register(*request);
  if (status.ok() && profiles_ != nullptr) profiles_->Register(*request);
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Lease(grpc::CallbackServerContext* context,
                                                   const quark::v1::internal::LeaseRequest* request,
                                                   quark::v1::internal::LeaseResponse* response) {
  absl::StatusOr<Principal> principal = Authorize(*context, "Lease");
  absl::Status status = principal.status();
  if (status.ok()) status = CheckWorkerId(request->worker_id());
  if (status.ok()) {
    status = AuditImpersonation(*principal, request->worker_id(), "Lease",
                                bindings_.Bind(*principal, request->worker_id(), "Lease"));
  }
  if (status.ok() && scheduler_->IsShutDown()) status = absl::UnavailableError("quarkd is shutting down");
  if (!status.ok()) return FinishNow(context, status);
  if (profiles_ != nullptr) profiles_->Seen(request->worker_id());
  int64_t wait_ms = std::clamp<int64_t>(request->wait_ms(), 0, kMaxLeaseWaitMs);
  auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(context->deadline() -
                                                                         std::chrono::system_clock::now());
  wait_ms = std::max<int64_t>(0, std::min<int64_t>(wait_ms, remaining.count() - kDeadlineMarginMs));
  return new LeaseReactor(context, scheduler_, access_, &bindings_, request->worker_id(), absl::Milliseconds(wait_ms),
                          response);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                       const quark::v1::internal::HeartbeatRequest* request,
                                                       quark::v1::internal::HeartbeatResponse* response) {
  absl::StatusOr<Principal> principal = Authorize(*context, "Heartbeat");
  absl::Status status = principal.status();
  if (status.ok()) status = CheckWorkerId(request->worker_id());
  if (status.ok()) {
    status = AuditImpersonation(*principal, request->worker_id(), "Heartbeat",
                                bindings_.Bind(*principal, request->worker_id(), "Heartbeat"));
  }
  if (status.ok()) {
    status = AuditImpersonation(
        *principal, request->lease_id(), "Heartbeat",
        bindings_.CheckLease(*principal, request->lease_id(), request->worker_id(), "Heartbeat"));
  }
  if (status.ok()) {
    if (profiles_ != nullptr) profiles_->Seen(request->worker_id());
    *response = scheduler_->Heartbeat(request->worker_id(), request->lease_id());
    if (response->lease_lost()) bindings_.ForgetLease(request->lease_id());
  }
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportProgress(grpc::CallbackServerContext* context,
                                                            const quark::v1::internal::ReportProgressRequest* request,
                                                            quark::v1::internal::ReportProgressResponse* response) {
  absl::StatusOr<Principal> principal = Authorize(*context, "ReportProgress");
  absl::Status status = principal.status();
  if (status.ok()) {
    status = AuditImpersonation(*principal, request->lease_id(), "ReportProgress",
                                bindings_.CheckLease(*principal, request->lease_id(), "", "ReportProgress"));
  }
  if (!status.ok()) return FinishNow(context, status);
  absl::StatusOr<bool> cancel = scheduler_->ReportProgress(*request);
  if (cancel.ok()) response->set_cancel(*cancel);
  return FinishNow(context, cancel.status());
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Complete(grpc::CallbackServerContext* context,
                                                      const quark::v1::internal::CompleteRequest* request,
                                                      quark::v1::internal::CompleteResponse* response) {
  absl::StatusOr<Principal> principal = Authorize(*context, "Complete");
  absl::Status status = principal.status();
  if (status.ok()) {
    status = AuditImpersonation(*principal, request->lease_id(), "Complete",
                                bindings_.CheckLease(*principal, request->lease_id(), "", "Complete"));
  }
  if (!status.ok()) return FinishNow(context, status);
  status = scheduler_->Complete(*request);
  bindings_.ForgetLease(request->lease_id());  // completed now, or unknown to the scheduler: over either way
  return FinishNow(context, status);
}

}  // namespace quark::server
