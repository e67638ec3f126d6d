#include "worker/storage/http_client.h"
#include "worker/storage/strings.h"

#include <memory>
#include <mutex>

#include <curl/curl.h>


namespace quark::storage {
namespace {

struct CurlDeleter {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Exchange {
  const HttpRequest* request = nullptr;
  HttpResponse response;
  CURL* handle = nullptr;
  bool sink_aborted = false;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  std::string_view line(data, size * count);
  if (str::StartsWith(line, "HTTP/")) {
    // A new status line (100 Continue, then the final one): keep only the last response's headers.
    exchange->response.headers.clear();
    return size * count;
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    exchange->response.headers.emplace_back(str::ToLower(line.substr(0, colon)),
                                            std::string(str::Trim(line.substr(colon + 1))));
  }
  return size * count;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  std::string_view chunk(data, size * count);
  // The final status is known once the body starts; it decides where the bytes go.
  curl_easy_getinfo(exchange->handle, CURLINFO_RESPONSE_CODE, &exchange->response.status);
  if (exchange->request->body_sink && exchange->response.status >= 200 && exchange->response.status < 300) {
    if (!exchange->request->body_sink(chunk)) {
      exchange->sink_aborted = true;
      return 0;
    }
    return chunk.size();
  }
  exchange->response.body.append(chunk);
  return chunk.size();
}

}  // namespace

std::string HttpResponse::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return "";
}

absl::StatusOr<HttpResponse> PerformHttp(const HttpRequest& request) {
  GlobalInitOnce();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return absl::InternalError("curl_easy_init failed");
  CURL* h = curl.get();
  Exchange exchange;
  exchange.request = &request;
  exchange.handle = h;

  std::unique_ptr<curl_slist, SlistDeleter> headers;
  curl_slist* list = nullptr;
  for (const auto& [name, value] : request.headers) {
    list = curl_slist_append(list, str::Cat(name, ": ", value).c_str());
  }
  // No "Expect: 100-continue" round trip, and no form content type that curl adds to bodies by default.
  list = curl_slist_append(list, "Expect:");
  headers.reset(list);

  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, request.connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, request.stall_timeout_s);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &exchange);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &exchange);
  if (request.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT" || request.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  } else if (request.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  CURLcode code = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &exchange.response.status);
  if (exchange.sink_aborted) {
    return absl::AbortedError(str::Cat(request.method, " ", request.url, ": download aborted by the receiver"));
  }
  if (code != CURLE_OK) {
    return absl::UnavailableError(str::Cat(request.method, " ", request.url, ": curl error ",
                                               static_cast<int>(code), ": ", curl_easy_strerror(code)));
  }
  return std::move(exchange.response);
}

}  // namespace quark::storage
