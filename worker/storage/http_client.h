// One blocking HTTP exchange over libcurl (the S3 client's transport). Thread-safe: every call owns its handle.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::storage {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  /// Sent as the request body (PUT/POST); must outlive the call.
  std::string_view body;
  /// When set, a 2xx response body is streamed here instead of into HttpResponse::body (downloads); returning
  /// false aborts the transfer. Error bodies always go to HttpResponse::body.
  std::function<bool(std::string_view)> body_sink;
  long connect_timeout_ms = 10000;
  /// A transfer slower than 1 byte/s for this long is aborted (a stalled peer), in seconds.
  long stall_timeout_s = 60;
};

struct HttpResponse {
  long status = 0;
  /// Header names lower-cased, in arrival order (of the final response only).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  /// The first header named `name` (lower-case), or "".
  std::string Header(std::string_view name) const;
};

/// Performs `request`. Any HTTP status is a value; UNAVAILABLE (naming method, URL and curl's message) when no
/// response arrived: refused or reset connections, timeouts, truncated bodies.
absl::StatusOr<HttpResponse> PerformHttp(const HttpRequest& request);

}  // namespace quark::storage
