#include "server/metrics/grpc_metrics_interceptor.h"

#include <chrono>
#include <string>

#include "google/protobuf/descriptor.h"

namespace quark::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

class GrpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  GrpcMetricsInterceptor(ServerMetrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)), start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status status = methods->GetSendStatus();
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      metrics_->grpc_requests.WithLabels({method_, StatusCodeName(status.error_code())}).Increment();
      metrics_->grpc_latency.WithLabels({method_}).Observe(seconds);
    }
    methods->Proceed();
  }

 private:
  ServerMetrics* metrics_;
  std::string method_;
  std::chrono::steady_clock::time_point start_;
};

// "/quark.v1.QuantizationService/GetJob": a method of a compiled-in service, or of health or reflection.
bool IsServedMethod(const std::string& path) {
  if (path == "/grpc.health.v1.Health/Check" || path == "/grpc.health.v1.Health/Watch" ||
      path == "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo") {
    return true;
  }
  size_t slash = path.rfind('/');
  if (path.size() < 2 || path[0] != '/' || slash == 0 || slash == std::string::npos) return false;
  std::string full_name = path.substr(1, slash - 1) + "." + path.substr(slash + 1);
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(full_name) != nullptr;
}

}  // namespace

grpc::experimental::Interceptor* GrpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  // Only the services quarkd serves become label values: a client naming arbitrary methods must not be able to
  // create unbounded series.
  std::string method = info->method() != nullptr ? info->method() : "";
  // gRPC owns and deletes the interceptor when the call ends.
  return new GrpcMetricsInterceptor(metrics_, IsServedMethod(method) ? method : "other");
}

const char* StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

}  // namespace quark::server
