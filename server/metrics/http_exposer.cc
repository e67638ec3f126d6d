#include "server/metrics/http_exposer.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

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
// long idle or kKeepAliveRequests requests, and the pool has kThreads threads and at most kMaxQueued connections
// waiting for one.
constexpr int kDeferAcceptSeconds = 2;
constexpr time_t kIoTimeoutSeconds = 2;
constexpr size_t kKeepAliveRequests = 16;
constexpr size_t kThreads = 16;
// Connections accepted and waiting for a thread. Past this the accept loop waits, so further clients stay in the
// kernel's listen backlog (bounded by it) instead of each costing quarkd a descriptor and queue memory: cpp-httplib's
// own pool queues every accepted connection without limit.
constexpr size_t kMaxQueued = 16;

// TaskQueue::enqueue returns void in cpp-httplib 0.11 (Debian bookworm) and bool in later versions (trixie's 0.18),
// where false refuses the connection. This pool never refuses (it blocks for space), so it answers "taken" where asked.
using EnqueueResult = decltype(std::declval<httplib::TaskQueue&>().enqueue(std::function<void()>()));
template <typename Result>
Result Taken() {
  if constexpr (std::is_same_v<Result, bool>) return true;
}

// cpp-httplib's TaskQueue with a bounded queue: enqueue() blocks while kMaxQueued connections wait.
class BoundedThreadPool : public httplib::TaskQueue {
 public:
  BoundedThreadPool() {
    for (size_t i = 0; i < kThreads; ++i) workers_.emplace_back([this] { Work(); });
  }

  EnqueueResult enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(mu_);
    space_.wait(lock, [this] { return queue_.size() < kMaxQueued || shutdown_; });
    queue_.push_back(std::move(fn));
    ready_.notify_one();
    return Taken<EnqueueResult>();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    ready_.notify_all();
    space_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [this] { return !queue_.empty() || shutdown_; });
        if (queue_.empty()) return;  // shut down with nothing left to serve
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      space_.notify_one();
      fn();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;  // a connection is queued
  std::condition_variable space_;  // the queue has room
  std::deque<std::function<void()>> queue_;
  bool shutdown_ = false;
  std::vector<std::thread> workers_;
};

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
  http.new_task_queue = [] { return new BoundedThreadPool(); };
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
