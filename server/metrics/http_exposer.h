// The /metrics HTTP endpoint (cpp-httplib on its own thread; idle and slow clients bounded, see LimitSlowClients).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/metrics/registry.h"

namespace httplib {
class Server;
}

namespace quark::server::metrics {

/// Serves GET /metrics (the registry's exposition) and GET /healthz ("ok").
class HttpExposer {
 public:
  /// Binds `host_port` ("127.0.0.1:9464"; port 0 picks a free one) and starts serving. `before_scrape`
  /// (optional) refreshes computed gauges. With `bearer_token` set, /metrics answers 401 unless the request
  /// carries "Authorization: Bearer <token>" (/healthz stays open). INVALID_ARGUMENT for a malformed address,
  /// UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpExposer>> Start(const std::string& host_port, const Registry* registry,
                                                            std::function<void()> before_scrape = nullptr,
                                                            std::string bearer_token = "");
  ~HttpExposer();
  HttpExposer(const HttpExposer&) = delete;
  HttpExposer& operator=(const HttpExposer&) = delete;

  /// The bound port.
  int port() const { return port_; }
  void Stop();

 private:
  HttpExposer() = default;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

/// Splits "host:port" ("[::1]:80" too). INVALID_ARGUMENT naming `field` and the value.
absl::Status SplitHostPort(const std::string& field, const std::string& host_port, std::string* host, int* port);

}  // namespace quark::server::metrics
