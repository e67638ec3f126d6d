#include "worker/storage/s3_object_store.h"
#include "worker/storage/strings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "core/base/digest.h"
#include "worker/storage/file_object_store.h"
#include "worker/storage/s3_xml.h"
#include "worker/storage/sigv4.h"

namespace quark::storage {
namespace fs = std::filesystem;
namespace {

// A download's local write failed: RESOURCE_EXHAUSTED for a full disk or quota, INTERNAL otherwise; names the file.
absl::Status LocalWriteError(const std::string& what, const fs::path& file, int error) {
  std::string message = str::Cat(what, ": writing ", file.string(), ": ", std::strerror(error));
  return error == ENOSPC || error == EDQUOT ? absl::ResourceExhaustedError(message) : absl::InternalError(message);
}

bool Retryable(long status) { return status >= 500 || status == 429; }

std::chrono::milliseconds Backoff(const S3Config& config, int attempt) {
  // Equal jitter: half the exponential delay fixed, half random, so retries of many clients spread out.
  int64_t base = config.initial_backoff.count() << std::min(attempt, 20);
  base = std::min<int64_t>(base, config.max_backoff.count());
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int64_t> jitter(0, std::max<int64_t>(base / 2, 0));
  return std::chrono::milliseconds(base / 2 + jitter(rng));
}

std::string StripQuotes(std::string_view etag) {
  return std::string(str::StripSuffix(str::StripPrefix(etag, "\""), "\""));
}

// A single-part ETag is the body's MD5; multipart ETags ("<hex>-<parts>") and SSE-KMS ones are not checkable.
bool IsMd5Etag(std::string_view etag) {
  return etag.size() == 32 && std::all_of(etag.begin(), etag.end(), [](char c) { return std::isxdigit(c); });
}

absl::Status CheckDownload(std::string_view what, const HttpResponse& response, int64_t size,
                           const std::string& md5_hex) {
  std::string length = response.Header("content-length");
  int64_t expected = 0;
  if (!length.empty() && str::ParseInt64(length, &expected) && expected != size) {
    return absl::DataLossError(str::Cat(what, ": got ", size, " bytes, Content-Length says ", expected));
  }
  std::string etag = StripQuotes(response.Header("etag"));
  if (IsMd5Etag(etag) && str::ToLower(etag) != md5_hex) {
    return absl::DataLossError(str::Cat(what, ": MD5 of the body is ", md5_hex, ", ETag says ", etag));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status S3ErrorStatus(const HttpResponse& response, std::string_view what) {
  std::string code = XmlFirst(response.body, "Code");
  std::string message = XmlFirst(response.body, "Message");
  std::string text = str::Cat(what, ": HTTP ", response.status, code.empty() ? "" : " ", code,
                                  message.empty() ? "" : ": ", message);
  if (response.status == 404) return absl::NotFoundError(text);
  if (response.status == 403) return absl::PermissionDeniedError(text);
  if (code == "BadDigest" || code == "InvalidDigest") return absl::DataLossError(text);
  if (response.status == 400) return absl::InvalidArgumentError(text);
  if (Retryable(response.status)) return absl::UnavailableError(text);
  return absl::InternalError(text);
}

S3ObjectStore::S3ObjectStore(S3Config config) : config_(std::move(config)) {
  endpoint_ = config_.EffectiveEndpoint();
  std::string_view rest = endpoint_;
  rest.remove_prefix(std::min(rest.find("://") + 3, rest.size()));
  host_ = std::string(rest.substr(0, rest.find('/')));
  endpoint_ = endpoint_.substr(0, endpoint_.size() - rest.size() + host_.size());
}

absl::StatusOr<ObjectUri> S3ObjectStore::ParseS3(std::string_view uri) const {
  absl::StatusOr<ObjectUri> parsed = ParseObjectUri(uri);
  if (!parsed.ok()) return parsed.status();
  if (parsed->scheme != ObjectUri::Scheme::kS3) {
    return absl::InvalidArgumentError(str::Cat("uri: ", uri, ": not an s3:// URI"));
  }
  return parsed;
}

absl::StatusOr<HttpResponse> S3ObjectStore::Send(const Call& call, std::string_view what) {
  std::string path = str::Cat("/", call.bucket, call.key.empty() ? "" : "/", UriEncode(call.key, false));
  std::string query = CanonicalQueryString(call.query);
  std::string payload_hash = Sha256Hex(call.body);
  absl::Status last = absl::UnavailableError("no attempt made");
  for (int attempt = 0; attempt < std::max(config_.max_attempts, 1); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(Backoff(config_, attempt - 1));
    if (call.on_attempt) call.on_attempt();
    HttpRequest request;
    request.method = call.method;
    request.url = str::Cat(endpoint_, path, query.empty() ? "" : "?", query);
    request.body = call.body;
    request.body_sink = call.body_sink;
    request.connect_timeout_ms = config_.connect_timeout_ms;
    request.stall_timeout_s = config_.stall_timeout_s;
    std::string amz_date = AmzDate(std::chrono::system_clock::now());
    request.headers = {{"host", host_}, {"x-amz-date", amz_date}, {"x-amz-content-sha256", payload_hash}};
    if (!config_.credentials.session_token.empty()) {
      request.headers.emplace_back("x-amz-security-token", config_.credentials.session_token);
    }
    for (const auto& header : call.headers) request.headers.push_back(header);
    if (!config_.credentials.access_key_id.empty()) {
      SigV4Request to_sign{call.method, path, call.query, request.headers, payload_hash};
      request.headers.emplace_back("authorization",
                                   SignV4(to_sign, config_.credentials, config_.region, "s3", amz_date));
    }
    absl::StatusOr<HttpResponse> response = PerformHttp(request);
    if (response.ok() && !Retryable(response->status)) return response;
    last = response.ok() ? S3ErrorStatus(*response, what) : response.status();
    if (!response.ok() && response.status().code() != absl::StatusCode::kUnavailable) return last;
  }
  return absl::UnavailableError(
      str::Cat(what, ": gave up after ", config_.max_attempts, " attempts; last: ", last.message()));
}

absl::Status S3ObjectStore::PutBytes(std::string_view uri, std::string_view bytes) {
  absl::StatusOr<ObjectUri> target = ParseS3(uri);
  if (!target.ok()) return target.status();
  return PutSingle(*target, bytes);
}

absl::Status S3ObjectStore::PutSingle(const ObjectUri& target, std::string_view bytes) {
  std::string what = str::Cat("PUT ", target.ToString());
  std::string md5 = Md5(bytes);
  Call call{"PUT", target.bucket, target.key, {},
            {{"content-md5", Base64Encode(md5)}, {"content-type", "application/octet-stream"}}, bytes};
  absl::StatusOr<HttpResponse> response = Send(call, what);
  if (!response.ok()) return response.status();
  if (response->status / 100 != 2) return S3ErrorStatus(*response, what);
  std::string etag = StripQuotes(response->Header("etag"));
  if (IsMd5Etag(etag) && str::ToLower(etag) != HexEncode(md5)) {
    return absl::DataLossError(str::Cat(what, ": stored ETag ", etag, " is not the body's MD5 ", HexEncode(md5)));
  }
  return absl::OkStatus();
}

absl::Status S3ObjectStore::PutFile(std::string_view uri, const fs::path& file) {
  absl::StatusOr<ObjectUri> target = ParseS3(uri);
  if (!target.ok()) return target.status();
  std::error_code ec;
  int64_t size = static_cast<int64_t>(fs::file_size(file, ec));
  if (ec) return absl::NotFoundError(str::Cat(file.string(), ": ", ec.message()));
  if (size >= config_.multipart_threshold_bytes && size > config_.part_size_bytes) {
    return PutMultipart(*target, file, size);
  }
  std::ifstream in(file, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), size);
  if (in.gcount() != size) return absl::InternalError(str::Cat(file.string(), ": short read"));
  return PutSingle(*target, bytes);
}

absl::StatusOr<std::string> S3ObjectStore::GetBytes(std::string_view uri) {
  absl::StatusOr<ObjectUri> source = ParseS3(uri);
  if (!source.ok()) return source.status();
  std::string what = str::Cat("GET ", uri);
  absl::StatusOr<HttpResponse> response = Send(Call{"GET", source->bucket, source->key}, what);
  if (!response.ok()) return response.status();
  if (response->status / 100 != 2) return S3ErrorStatus(*response, what);
  absl::Status check =
      CheckDownload(what, *response, static_cast<int64_t>(response->body.size()), HexEncode(Md5(response->body)));
  if (!check.ok()) return check;
  return std::move(response->body);
}

absl::Status S3ObjectStore::GetFile(std::string_view uri, const fs::path& file) {
  absl::StatusOr<ObjectUri> source = ParseS3(uri);
  if (!source.ok()) return source.status();
  std::string what = str::Cat("GET ", uri);
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  fs::path temp = file.parent_path() / str::Cat(".", file.filename().string(), ".tmp-download");
  std::ofstream out;
  std::unique_ptr<StreamingDigest> digest;
  int64_t size = 0;
  Call call{"GET", source->bucket, source->key};
  call.on_attempt = [&] {
    out = std::ofstream(temp, std::ios::binary | std::ios::trunc);
    digest = std::make_unique<StreamingDigest>();
    size = 0;
  };
  int write_errno = 0;  // a local write that failed (a full disk): the download stops with this, not retried
  call.body_sink = [&](std::string_view chunk) {
    errno = 0;
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    digest->Update(chunk);
    size += static_cast<int64_t>(chunk.size());
    if (!out) write_errno = errno != 0 ? errno : EIO;
    return static_cast<bool>(out);
  };
  absl::StatusOr<HttpResponse> response = Send(call, what);
  out.close();
  absl::Status status = response.ok() ? absl::OkStatus() : response.status();
  if (write_errno != 0) status = LocalWriteError(what, temp, write_errno);
  if (status.ok() && response->status / 100 != 2) status = S3ErrorStatus(*response, what);
  if (status.ok()) {
    std::string md5;
    digest->Finish(nullptr, &md5);
    status = CheckDownload(what, *response, size, md5);
  }
  if (status.ok()) {
    fs::rename(temp, file, ec);
    if (ec) status = absl::InternalError(str::Cat("rename to ", file.string(), ": ", ec.message()));
  }
  if (!status.ok()) fs::remove(temp, ec);
  return status;
}

absl::StatusOr<ObjectInfo> S3ObjectStore::Head(std::string_view uri) {
  absl::StatusOr<ObjectUri> source = ParseS3(uri);
  if (!source.ok()) return source.status();
  std::string what = str::Cat("HEAD ", uri);
  absl::StatusOr<HttpResponse> response = Send(Call{"HEAD", source->bucket, source->key}, what);
  if (!response.ok()) return response.status();
  if (response->status / 100 != 2) return S3ErrorStatus(*response, what);
  ObjectInfo info{std::string(uri), 0, StripQuotes(response->Header("etag"))};
  if (!str::ParseInt64(response->Header("content-length"), &info.size_bytes)) info.size_bytes = 0;
  return info;
}

absl::StatusOr<std::vector<ObjectInfo>> S3ObjectStore::List(std::string_view prefix_uri) {
  absl::StatusOr<ObjectUri> source = ParseS3(prefix_uri);
  if (!source.ok()) return source.status();
  std::string prefix = source->key;
  if (!prefix.empty() && prefix.back() != '/') prefix.push_back('/');
  std::vector<ObjectInfo> out;
  std::string token;
  std::string what = str::Cat("LIST ", prefix_uri);
  for (;;) {
    Call call{"GET", source->bucket, "", {{"list-type", "2"}, {"prefix", prefix}}};
    if (!token.empty()) call.query.emplace_back("continuation-token", token);
    absl::StatusOr<HttpResponse> response = Send(call, what);
    if (!response.ok()) return response.status();
    if (response->status / 100 != 2) return S3ErrorStatus(*response, what);
    for (const std::string& contents : XmlElements(response->body, "Contents")) {
      ObjectInfo info{str::Cat("s3://", source->bucket, "/", XmlFirst(contents, "Key")), 0,
                      StripQuotes(XmlFirst(contents, "ETag"))};
      if (!str::ParseInt64(XmlFirst(contents, "Size"), &info.size_bytes)) info.size_bytes = 0;
      out.push_back(std::move(info));
    }
    token = XmlFirst(response->body, "NextContinuationToken");
    if (XmlFirst(response->body, "IsTruncated") != "true" || token.empty()) break;
  }
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.uri < b.uri; });
  return out;
}

absl::Status S3ObjectStore::Delete(std::string_view uri) {
  absl::StatusOr<ObjectUri> target = ParseS3(uri);
  if (!target.ok()) return target.status();
  std::string what = str::Cat("DELETE ", uri);
  absl::StatusOr<HttpResponse> response = Send(Call{"DELETE", target->bucket, target->key}, what);
  if (!response.ok()) return response.status();
  if (response->status / 100 != 2 && response->status != 404) return S3ErrorStatus(*response, what);
  return absl::OkStatus();
}

absl::Status S3ObjectStore::CreateBucket(std::string_view bucket) {
  std::string what = str::Cat("CREATE BUCKET s3://", bucket);
  absl::StatusOr<HttpResponse> response = Send(Call{"PUT", std::string(bucket), ""}, what);
  if (!response.ok()) return response.status();
  if (response->status / 100 == 2) return absl::OkStatus();
  if (XmlFirst(response->body, "Code") == "BucketAlreadyOwnedByYou") return absl::OkStatus();
  return S3ErrorStatus(*response, what);
}

}  // namespace quark::storage
