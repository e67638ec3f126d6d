#include "server/metrics/http_exposer.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/metrics/text_format.h"
#include "server/security/security_config.h"

namespace quark::server::metrics {

absl::Status SplitHostPort(const std::string& field, const std::string& host_port, std::string* host, int* port) {
  size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", host_port, "\" is not HOST:PORT"));
  }
  *host = host_port.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  if (!absl::SimpleAtoi(host_port.substr(colon + 1), port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", host_port, "\" has no valid port (0-65535)"));
  }
  return absl::OkStatus();
}

namespace {

// Idle or slow clients must not hold the exposer's threads (issue #29 item 9: eight idle unauthenticated connections
// made /metrics time out, each holding one of the eight threads for its 5 s read timeout). The kernel hands a
// connection over only once its request bytes arrive (TCP_DEFER_ACCEPT: a connection that sends nothing never
// reaches a thread), every read and write gives up after kIoTimeoutSeconds, a kept-alive connection closes after as
// long idle or kKeepAliveRequests requests, and the pool has kThreads threads.
constexpr int kDeferAcceptSeconds = 2;
constexpr time_t kIoTimeoutSeconds = 2;
constexpr size_t kKeepAliveRequests = 16;
constexpr size_t kThreads = 16;

void LimitSlowClients(httplib::Server& http) {
  http.set_socket_options([](socket_t sock) {
    httplib::default_socket_options(sock);
    int seconds = kDeferAcceptSeconds;
    setsockopt(sock, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof(seconds));
  });
  http.set_read_timeout(kIoTimeoutSeconds);
  http.set_write_timeout(kIoTimeoutSeconds);
  http.set_keep_alive_timeout(kIoTimeoutSeconds);
  http.set_keep_alive_max_count(kKeepAliveRequests);
  http.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpExposer>> HttpExposer::Start(const std::string& host_port,
                                                                const Registry* registry,
                                                                std::function<void()> before_scrape,
                                                                std::string bearer_token) {
  std::string host;
  int port = 0;
  absl::Status status = SplitHostPort("metrics-listen", host_port, &host, &port);
  if (!status.ok()) return status;
  std::unique_ptr<HttpExposer> exposer(new HttpExposer());
  exposer->http_ = std::make_unique<httplib::Server>();
  LimitSlowClients(*exposer->http_);
  exposer->http_->Get("/metrics", [registry, before_scrape, bearer_token](const httplib::Request& request,
                                                                          httplib::Response& response) {
    if (!bearer_token.empty() &&
        !ConstantTimeEquals(request.get_header_value("Authorization"), absl::StrCat("Bearer ", bearer_token))) {
      response.status = 401;
      response.set_header("WWW-Authenticate", "Bearer realm=\"quarkd metrics\"");
      response.set_content("unauthorized\n", "text/plain");
      return;
    }
    if (before_scrape) before_scrape();
    response.set_content(registry->Render(), kTextContentType);
  });
  exposer->http_->Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  int bound = port == 0 ? exposer->http_->bind_to_any_port(host) : (exposer->http_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return absl::UnavailableError(absl::StrCat("metrics-listen: cannot bind \"", host_port, "\""));
  }
  exposer->port_ = bound;
  httplib::Server* http = exposer->http_.get();
  exposer->thread_ = std::thread([http] { http->listen_after_bind(); });
  return exposer;
}

void HttpExposer::Stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpExposer::~HttpExposer() { Stop(); }

}  // namespace quark::server::metrics
