// Where an S3 client gets its endpoint, region and keys: the environment first, then AWS-style files.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "worker/storage/sigv4.h"

namespace quark::storage {

struct S3Config {
  /// Scheme, host and port ("http://127.0.0.1:4568"); empty = "https://s3.<region>.amazonaws.com".
  /// Requests use path-style addressing: <endpoint>/<bucket>/<key>.
  std::string endpoint;
  std::string region = "us-east-1";
  /// Empty access key = anonymous, unsigned requests (public buckets).
  SigV4Credentials credentials;
  /// Files at least this large go up as multipart uploads of part_size_bytes parts (S3's minimum part is 5 MiB).
  int64_t multipart_threshold_bytes = int64_t{64} << 20;
  int64_t part_size_bytes = int64_t{16} << 20;
  /// Tries per request (first one included) on 5xx, 429, resets and timeouts; backoff doubles from
  /// initial_backoff up to max_backoff, with full jitter.
  int max_attempts = 5;
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10000};
  long connect_timeout_ms = 10000;
  long stall_timeout_s = 60;

  /// The endpoint actually used (the default one filled in), without a trailing '/'.
  std::string EffectiveEndpoint() const;
};

/// Reads a variable; std::nullopt when unset. Tests pass a map instead of the process environment.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

/// The process environment.
EnvLookup ProcessEnvironment();

/// Builds an S3Config. Keys: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else the profile
/// AWS_PROFILE (default "default") of AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials). Region: AWS_REGION,
/// AWS_DEFAULT_REGION, then "region" of the profile in AWS_CONFIG_FILE (default ~/.aws/config), then us-east-1.
/// Endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then "endpoint_url" of the config profile.
/// INVALID_ARGUMENT naming the variable or file when only one half of a key pair is set or the endpoint has no
/// http:// or https:// scheme. Missing files are not errors.
absl::StatusOr<S3Config> LoadS3Config(const EnvLookup& env);

/// Sections of an INI file ("[default]", "[profile x]") mapped to key = value pairs (keys lower-cased).
std::map<std::string, std::map<std::string, std::string>> ParseIni(std::string_view text);

}  // namespace quark::storage
