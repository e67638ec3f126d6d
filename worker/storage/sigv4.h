// AWS Signature Version 4 (header form) for S3 requests. Pure functions: no clock, no network.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quark::storage {

struct SigV4Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  /// Optional (temporary credentials): sent as x-amz-security-token, which the caller adds to the headers.
  std::string session_token;
};

/// The parts of one HTTP request that SigV4 signs.
struct SigV4Request {
  std::string method;  // "GET", "PUT", ...
  /// The path exactly as sent on the wire, already URI-encoded ("/bucket/my%20key").
  std::string encoded_path;
  /// Query parameters, raw (not encoded); SigV4 encodes and sorts them. A name with an empty value is "name=".
  std::vector<std::pair<std::string, std::string>> query;
  /// Headers to sign, names in any case; must include "host" and "x-amz-date".
  std::vector<std::pair<std::string, std::string>> headers;
  /// Lower-case hex SHA-256 of the body (or "UNSIGNED-PAYLOAD").
  std::string payload_sha256_hex;
};

/// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters (A-Z a-z 0-9 - _ . ~) stay, everything else
/// becomes %XX (upper-case hex); '/' stays unless `encode_slash`.
std::string UriEncode(std::string_view text, bool encode_slash);

/// The sorted, encoded query string ("a=1&b=x%2Fy"), also usable on the wire.
std::string CanonicalQueryString(const std::vector<std::pair<std::string, std::string>>& query);

/// "YYYYMMDDTHHMMSSZ" in UTC.
std::string AmzDate(std::chrono::system_clock::time_point time);

/// The canonical request (exposed for tests and for debugging SignatureDoesNotMatch).
std::string CanonicalRequest(const SigV4Request& request);

/// The value of the Authorization header:
/// "AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=...".
/// `amz_date` must equal the request's x-amz-date header.
std::string SignV4(const SigV4Request& request, const SigV4Credentials& credentials, std::string_view region,
                   std::string_view service, std::string_view amz_date);

}  // namespace quark::storage
