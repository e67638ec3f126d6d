#include "worker/storage/manifest_signature.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/digest.h"
#include "worker/storage/object_uri.h"

namespace quark::storage {
namespace fs = std::filesystem;
namespace {

constexpr char kAlgorithm[] = "ed25519";

// The SHA-256 (hex) of the object at `uri`: read in place when the store keeps it on this disk, else downloaded
// to a private temporary file.
absl::StatusOr<std::string> ObjectSha256(ObjectStore& store, std::string_view uri) {
  if (absl::StatusOr<fs::path> local = store.LocalPath(uri); local.ok()) return Sha256FileHex(*local);
  std::string temp = (fs::temp_directory_path() / "quark-verify-XXXXXX").string();
  const int fd = mkstemp(temp.data());
  if (fd < 0) return absl::InternalError("cannot create a temporary file to download " + std::string(uri));
  close(fd);
  absl::Status fetched = store.GetFile(uri, temp);
  absl::StatusOr<std::string> sha = fetched.ok() ? Sha256FileHex(temp) : absl::StatusOr<std::string>(fetched);
  std::error_code ec;
  fs::remove(temp, ec);
  return sha;
}

// The signature's problem, if any ("" = signed by a trusted key and intact).
std::string CheckSignature(const nlohmann::json& doc, const std::vector<Ed25519PublicKey>& trusted,
                           std::string& key_id) {
  if (!doc.contains("signature")) return "signature: missing (the manifest is not signed)";
  const nlohmann::json& signature = doc["signature"];
  if (!signature.is_object() || !signature.value("key_id", nlohmann::json()).is_string() ||
      !signature.value("value", nlohmann::json()).is_string()) {
    return "signature: not an object with string key_id and value";
  }
  if (signature.value("algorithm", std::string()) != kAlgorithm) {
    return absl::StrCat("signature.algorithm: \"", signature.value("algorithm", std::string()), "\", expected ",
                        kAlgorithm);
  }
  key_id = signature["key_id"].get<std::string>();
  const Ed25519PublicKey* key = nullptr;
  std::vector<std::string> known;
  for (const Ed25519PublicKey& candidate : trusted) {
    known.push_back(candidate.key_id());
    if (candidate.key_id() == key_id) key = &candidate;
  }
  if (key == nullptr) {
    return absl::StrCat("signature.key_id: the manifest was signed by key ", key_id, ", which is not a trusted key (",
                        known.empty() ? "none given" : absl::StrCat("trusted: ", absl::StrJoin(known, ", ")), ")");
  }
  absl::StatusOr<std::string> value = Base64Decode(signature["value"].get<std::string>());
  if (!value.ok()) return absl::StrCat("signature.value: ", value.status().message());
  if (!key->Verify(ManifestSigningBytes(doc), *value)) {
    return absl::StrCat("signature: does not match the manifest's content for key ", key_id,
                        " (the manifest was changed after it was signed)");
  }
  return "";
}

// Every listed file: present, its size, its SHA-256. Appends one problem per file that differs.
void CheckFiles(ObjectStore& store, std::string_view prefix, const nlohmann::json& files, ManifestCheck& check) {
  for (size_t i = 0; i < files.size(); ++i) {
    const nlohmann::json& file = files[i];
    const std::string path = file.value("path", std::string());
    const std::string where = absl::StrCat("files[", i, "] ", path);
    if (path.empty() || !file.value("sha256", nlohmann::json()).is_string()) {
      check.problems.push_back(where + ": no path or sha256");
      continue;
    }
    const std::string uri = JoinUri(prefix, path);
    ++check.files_checked;
    absl::StatusOr<ObjectInfo> head = store.Head(uri);
    if (!head.ok()) {
      check.problems.push_back(absl::StrCat(where, ": missing (", head.status().message(), ")"));
      continue;
    }
    if (file.contains("size_bytes") && file["size_bytes"] != head->size_bytes) {
      check.problems.push_back(absl::StrCat(where, ": ", head->size_bytes, " bytes, the manifest says ",
                                            file["size_bytes"].dump()));
    }
    absl::StatusOr<std::string> sha = ObjectSha256(store, uri);
    if (!sha.ok()) {
      check.problems.push_back(absl::StrCat(where, ": cannot read (", sha.status().message(), ")"));
    } else if (*sha != file["sha256"].get<std::string>()) {
      check.problems.push_back(absl::StrCat(where, ": sha256 ", *sha, ", the manifest says ",
                                            file["sha256"].get<std::string>()));
    }
  }
}

}  // namespace

std::string ManifestSigningBytes(const nlohmann::json& doc) {
  nlohmann::json copy = doc;
  if (copy.is_object()) copy.erase("signature");
  return copy.dump();
}

void SignManifest(nlohmann::json& doc, const Ed25519Signer& signer) {
  const std::string signature = signer.Sign(ManifestSigningBytes(doc));
  doc["signature"] = {{"algorithm", kAlgorithm},
                      {"key_id", signer.public_key().key_id()},
                      {"value", Base64Encode(signature)}};
}

absl::StatusOr<ManifestCheck> VerifyManifest(ObjectStore& store, std::string_view manifest_uri,
                                             const std::vector<Ed25519PublicKey>& trusted) {
  absl::StatusOr<std::string> text = store.GetBytes(manifest_uri);
  if (!text.ok()) return text.status();
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
  if (!doc.is_object()) return absl::InvalidArgumentError(absl::StrCat(std::string(manifest_uri), ": not a JSON object"));
  if (!doc.contains("files") || !doc["files"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(manifest_uri), ": files: missing or not a list"));
  }
  ManifestCheck check;
  if (std::string problem = CheckSignature(doc, trusted, check.key_id); !problem.empty()) {
    check.problems.push_back(std::move(problem));
  }
  const size_t slash = manifest_uri.rfind('/');
  const std::string_view prefix = manifest_uri.substr(0, slash == std::string_view::npos ? 0 : slash);
  CheckFiles(store, prefix, doc["files"], check);
  return check;
}

}  // namespace quark::storage
