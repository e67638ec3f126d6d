// Signed provenance (#34): manifest.json carries an Ed25519 signature of its own content, and a reader checks the
// signature against trusted public keys and every listed file's SHA-256 against the bytes in the store.
//
// The signature field:  "signature": {"algorithm": "ed25519", "key_id": "<16 hex>", "value": "<base64, 64 bytes>"}
// signs the manifest without that field, serialized as compact JSON with sorted keys (nlohmann::json::dump()).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/base/ed25519.h"
#include "worker/storage/object_store.h"

namespace quark::storage {

/// The bytes a manifest's signature covers: `doc` without "signature", compact, keys sorted.
std::string ManifestSigningBytes(const nlohmann::json& doc);

/// Sets doc["signature"] (replacing any) to `signer`'s signature of ManifestSigningBytes(doc).
void SignManifest(nlohmann::json& doc, const Ed25519Signer& signer);

struct ManifestCheck {
  std::string key_id;                  // the key id the manifest names ("" when unsigned)
  int files_checked = 0;
  std::vector<std::string> problems;   // each names what differs; empty = verified
  bool ok() const { return problems.empty(); }
};

/// Checks the signature of the manifest at `manifest_uri` (one of `trusted` must have signed it: an unknown key id
/// is named) and every listed file under the manifest's folder: present, its size, its SHA-256. Problems are
/// collected, not stopped at. Errors only when the manifest itself cannot be read (the store's error) or is not a
/// manifest (INVALID_ARGUMENT naming the field).
absl::StatusOr<ManifestCheck> VerifyManifest(ObjectStore& store, std::string_view manifest_uri,
                                             const std::vector<Ed25519PublicKey>& trusted);

}  // namespace quark::storage
