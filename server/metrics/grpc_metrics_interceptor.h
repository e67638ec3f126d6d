// Counts every gRPC call by method and status code and times it (quarkd_grpc_requests_total,
// quarkd_grpc_request_duration_seconds).
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include "server/metrics/server_metrics.h"

namespace quark::server {

class GrpcMetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  /// `metrics` must outlive the server.
  explicit GrpcMetricsInterceptorFactory(ServerMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  ServerMetrics* metrics_;
};

/// The gRPC name of a status code ("OK", "INVALID_ARGUMENT", ...).
const char* StatusCodeName(grpc::StatusCode code);

}  // namespace quark::server
