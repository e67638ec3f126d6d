// s3:// objects over HTTP(S): SigV4-signed, path-style, retried with backoff, checksummed.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "worker/storage/http_client.h"
#include "worker/storage/object_store.h"
#include "worker/storage/object_uri.h"
#include "worker/storage/s3_config.h"

namespace quark::storage {

/// Every request carries x-amz-content-sha256 (the payload's real SHA-256) and uploads carry Content-MD5, so the
/// store refuses corrupted bodies; downloads are checked against single-part ETags (MD5) and Content-Length
/// (DATA_LOSS on mismatch). 5xx, 429, connection resets and timeouts are retried S3Config::max_attempts times
/// with exponential backoff; files of S3Config::multipart_threshold_bytes or more go up as multipart uploads,
/// aborted on failure so no partial object is ever visible.
class S3ObjectStore : public ObjectStore {
 public:
  explicit S3ObjectStore(S3Config config);

  absl::Status PutFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::Status PutBytes(std::string_view uri, std::string_view bytes) override;
  absl::StatusOr<std::string> GetBytes(std::string_view uri) override;
  absl::Status GetFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::StatusOr<ObjectInfo> Head(std::string_view uri) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(std::string_view prefix_uri) override;
  absl::Status Delete(std::string_view uri) override;

  /// Creates a bucket (PUT /bucket); OK when it exists and is owned by the caller. For tests and setup tools.
  absl::Status CreateBucket(std::string_view bucket);

  const S3Config& config() const { return config_; }

 private:
  struct Call {
    std::string method;
    std::string bucket;
    std::string key;
    std::vector<std::pair<std::string, std::string>> query;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string_view body;
    /// Downloads: 2xx bodies stream here; `on_attempt` runs before every try so the sink can start over.
    std::function<bool(std::string_view)> body_sink;
    std::function<void()> on_attempt;
  };

  /// Signs and sends `call`, retrying transport errors, 5xx and 429. Returns the last response of any status;
  /// UNAVAILABLE naming `what` once the tries are spent.
  absl::StatusOr<HttpResponse> Send(const Call& call, std::string_view what);
  absl::StatusOr<ObjectUri> ParseS3(std::string_view uri) const;
  absl::Status PutSingle(const ObjectUri& target, std::string_view bytes);
  absl::Status PutMultipart(const ObjectUri& target, const std::filesystem::path& file, int64_t size);
  absl::StatusOr<std::vector<std::string>> UploadParts(const ObjectUri& target, const std::string& upload_id,
                                                       const std::filesystem::path& file, int64_t size);

  S3Config config_;
  std::string endpoint_;  // scheme://host[:port]
  std::string host_;      // host[:port], as signed
};

/// The absl::Status for a non-2xx S3 answer: 404 NOT_FOUND, 403 PERMISSION_DENIED, 400 INVALID_ARGUMENT (BadDigest
/// DATA_LOSS), 5xx UNAVAILABLE, other INTERNAL; the message names `what` and S3's Code and Message.
absl::Status S3ErrorStatus(const HttpResponse& response, std::string_view what);

}  // namespace quark::storage
