#include "worker/worker_agent.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/base/log.h"
#include "worker/lease_run.h"
#include "worker/storage/strings.h"

namespace quark::worker {
namespace {

namespace internal = quark::v1::internal;

absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(str::Cat(flag, ": cannot read \"", path, "\""));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeWorkerChannel(const WorkerAgentOptions& options) {
  if (options.tls_ca.empty() && options.tls_cert.empty() && options.tls_key.empty()) {
    return grpc::CreateChannel(options.server_address, grpc::InsecureChannelCredentials());
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("tls-cert and tls-key: give both or neither");
  }
  grpc::SslCredentialsOptions ssl;
  struct File {
    const char* flag;
    const std::string& path;
    std::string* out;
  };
  for (const File& file : {File{"tls-ca", options.tls_ca, &ssl.pem_root_certs},
                           File{"tls-cert", options.tls_cert, &ssl.pem_cert_chain},
                           File{"tls-key", options.tls_key, &ssl.pem_private_key}}) {
    if (file.path.empty()) continue;
    absl::StatusOr<std::string> pem = ReadPem(file.flag, file.path);
    if (!pem.ok()) return pem.status();
    *file.out = std::move(*pem);
  }
  return grpc::CreateChannel(options.server_address, grpc::SslCredentials(ssl));
}

bool IsTransientRpcError(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

std::string DefaultWorkerId() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return str::Cat(host, ":", static_cast<int64_t>(getpid()));
}

WorkerAgent::WorkerAgent(WorkerAgentOptions options, std::shared_ptr<JobRunner> runner)
    : WorkerAgent(options, std::move(runner),
                  grpc::CreateChannel(options.server_address, grpc::InsecureChannelCredentials())) {}

void WorkerAgent::AddToken(grpc::ClientContext* context) const {
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
}

WorkerAgent::WorkerAgent(WorkerAgentOptions options, std::shared_ptr<JobRunner> runner,
                         std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)), runner_(std::move(runner)), channel_(std::move(channel)) {
  if (options_.worker_id.empty()) options_.worker_id = DefaultWorkerId();
  options_.slots = std::max(options_.slots, 1);
  stub_ = internal::WorkerService::NewStub(channel_);
}

WorkerAgent::~WorkerAgent() { Stop(); }

std::unique_ptr<grpc::ClientContext> WorkerAgent::NewContext(std::chrono::milliseconds timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  AddToken(context.get());
  std::lock_guard<std::mutex> lock(mu_);
  // A call started after Stop() gets an already-expired deadline instead of a cancel that could race its start.
  context->set_deadline(std::chrono::system_clock::now() +
                        (stopping_.load() ? std::chrono::milliseconds(0) : timeout));
  live_contexts_.insert(context.get());
  return context;
}

void WorkerAgent::Untrack(grpc::ClientContext* context) {
  std::lock_guard<std::mutex> lock(mu_);
  live_contexts_.erase(context);
}

bool WorkerAgent::Backoff(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  return !stop_cv_.wait_for(lock, wait, [&] { return stopping_.load(); });
}

void WorkerAgent::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_.store(true);
  for (grpc::ClientContext* context : live_contexts_) context->TryCancel();
  for (CancelToken* token : live_tokens_) token->Cancel(CancelToken::Reason::kShutdown);
  stop_cv_.notify_all();
}

absl::Status WorkerAgent::Register() {
  std::chrono::milliseconds wait = options_.reconnect_min;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  while (!stopping_.load()) {
    internal::RegisterRequest request;
    request.set_worker_id(options_.worker_id);
    request.set_hostname(host);
    request.set_slots(options_.slots);
    for (const std::string& device : options_.devices) request.add_devices(device);
    request.set_version(options_.version);
    if (options_.throughput) *request.mutable_throughput() = *options_.throughput;
    internal::RegisterResponse response;
    std::unique_ptr<grpc::ClientContext> context = NewContext(options_.rpc_timeout);
    grpc::Status status = stub_->Register(context.get(), request, &response);
    Untrack(context.get());
    if (status.ok()) {
      if (response.heartbeat_interval_ms() > 0) heartbeat_interval_ms_.store(response.heartbeat_interval_ms());
      lease_timeout_ms_.store(std::max<int64_t>(0, response.lease_timeout_ms()));
      log::Get("worker")->info("worker={} registered with {} (heartbeat {} ms, lease timeout {} ms)", options_.worker_id,
                               options_.server_address, heartbeat_interval_ms_.load(), lease_timeout_ms_.load());
      return absl::OkStatus();
    }
    if (!IsTransientRpcError(status) && status.error_code() != grpc::StatusCode::CANCELLED) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          str::Cat("Register with ", options_.server_address, ": ", status.error_message()));
    }
    log::Get("worker")->debug("worker={} register: {}; retrying", options_.worker_id, status.error_message());
    if (!Backoff(wait)) break;
    wait = std::min(wait * 2, options_.reconnect_max);
  }
  return absl::OkStatus();
}

absl::Status WorkerAgent::Run() {
  if (absl::Status status = Register(); !status.ok()) return status;
  idle_since_ms_.store(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now().time_since_epoch()).count());
  std::vector<std::thread> slots;
  for (int i = 0; i < options_.slots; ++i) slots.emplace_back([this, i] { LeaseLoop(i); });
  for (std::thread& slot : slots) slot.join();
  log::Get("worker")->info("worker={} stopped after {} jobs", options_.worker_id, jobs_finished_.load());
  return absl::OkStatus();
}

}  // namespace quark::worker
