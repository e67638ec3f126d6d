// Ed25519 signing keys (OpenSSL) for signed provenance: quark-worker signs the manifests it publishes with the
// private key given by --signing-key, quarkd serves the public key, quarkctl verify checks signatures with it.
// A key is named by its key id: the first 16 hex characters of the SHA-256 of its raw 32-byte public key.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace quark {

/// Base64 (standard alphabet, padded) decoded; INVALID_ARGUMENT for anything else.
absl::StatusOr<std::string> Base64Decode(std::string_view text);

/// An Ed25519 public key. Immutable, thread-safe.
class Ed25519PublicKey {
 public:
  /// From the raw 32 bytes; INVALID_ARGUMENT for another length.
  static absl::StatusOr<Ed25519PublicKey> FromRaw(std::string_view raw);
  /// From base64 of the raw 32 bytes (what quarkd serves and manifests carry).
  static absl::StatusOr<Ed25519PublicKey> FromBase64(std::string_view text);
  /// From a PEM "PUBLIC KEY" (SubjectPublicKeyInfo, as `openssl pkey -pubout` writes); errors name the problem.
  static absl::StatusOr<Ed25519PublicKey> FromPem(std::string_view pem);

  const std::string& raw() const { return raw_; }
  std::string base64() const;
  std::string pem() const;
  /// 16 lower-case hex characters.
  const std::string& key_id() const { return key_id_; }
  /// True when `signature` (64 raw bytes) is this key's signature of `message`.
  bool Verify(std::string_view message, std::string_view signature) const;

 private:
  explicit Ed25519PublicKey(std::string raw);
  std::string raw_;
  std::string key_id_;
};

/// An Ed25519 private key. Sign is thread-safe.
class Ed25519Signer {
 public:
  /// Reads a PEM "PRIVATE KEY" (PKCS#8, as `openssl genpkey -algorithm ed25519` writes). Errors name the file:
  /// NOT_FOUND when it cannot be read, INVALID_ARGUMENT when it is not an Ed25519 private key.
  static absl::StatusOr<std::unique_ptr<Ed25519Signer>> FromPemFile(const std::filesystem::path& path);
  static absl::StatusOr<std::unique_ptr<Ed25519Signer>> FromPem(std::string_view pem);
  ~Ed25519Signer();
  Ed25519Signer(const Ed25519Signer&) = delete;
  Ed25519Signer& operator=(const Ed25519Signer&) = delete;

  const Ed25519PublicKey& public_key() const { return public_key_; }
  /// The 64-byte signature of `message`.
  std::string Sign(std::string_view message) const;

 private:
  struct Key;
  Ed25519Signer(std::unique_ptr<Key> key, Ed25519PublicKey public_key);
  std::unique_ptr<Key> key_;
  Ed25519PublicKey public_key_;
};

}  // namespace quark
