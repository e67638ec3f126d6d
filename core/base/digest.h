// Hashes the storage layer and the server need: SHA-256 (manifests, SigV4 payloads, content keys), HMAC-SHA256
// (SigV4 keys), MD5 (S3 ETags and Content-MD5). OpenSSL underneath; its own library (quark_digest), so that the
// server takes it without the worker's storage code.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace quark {

/// Lower-case hex of `bytes`.
std::string HexEncode(std::string_view bytes);

/// SHA-256 of `data`, lower-case hex (64 characters).
std::string Sha256Hex(std::string_view data);

/// SHA-256 of a whole file, lower-case hex; NOT_FOUND / INTERNAL naming the path on read errors.
absl::StatusOr<std::string> Sha256FileHex(const std::filesystem::path& path);

/// HMAC-SHA256 of `data` under `key`, raw 32 bytes.
std::string HmacSha256(std::string_view key, std::string_view data);

/// MD5 of `data`, raw 16 bytes.
std::string Md5(std::string_view data);

/// MD5 of a whole file, lower-case hex.
absl::StatusOr<std::string> Md5FileHex(const std::filesystem::path& path);

/// Standard base64 (with padding).
std::string Base64Encode(std::string_view bytes);

/// Incremental SHA-256 and MD5 for data that arrives in pieces (downloads).
class StreamingDigest {
 public:
  StreamingDigest();
  ~StreamingDigest();
  StreamingDigest(const StreamingDigest&) = delete;
  StreamingDigest& operator=(const StreamingDigest&) = delete;

  void Update(std::string_view data);
  /// Finishes both digests; call once. Hex strings.
  void Finish(std::string* sha256_hex, std::string* md5_hex);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace quark
