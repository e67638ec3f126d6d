// quarkctl's signed-provenance subcommands (#34): `key` prints quarkd's manifest signing key, `verify` checks a
// published manifest.json (its Ed25519 signature, then every artifact's size and SHA-256) and exits 6 naming
// what differs.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/output.h"
#include "core/base/ed25519.h"
#include "worker/storage/manifest_signature.h"
#include "worker/storage/routing_object_store.h"

namespace quark::client {
namespace {

absl::StatusOr<quark::v1::SigningKey> FetchSigningKey(CommandContext& ctx) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + ctx.timeout);
  quark::v1::SigningKey key;
  grpc::Status status = ctx.provenance_stub->GetSigningKey(&context, quark::v1::GetSigningKeyRequest(), &key);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("GetSigningKey on ", ctx.server, ": ", StatusCodeName(status.error_code()), ": ",
                                     status.error_message()));
  }
  return key;
}

// One --key: a PEM public key file, else the base64 of the raw key.
absl::StatusOr<Ed25519PublicKey> LoadKey(const std::string& key) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(key, ec)) {
    std::ifstream in(key, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    absl::StatusOr<Ed25519PublicKey> parsed = Ed25519PublicKey::FromPem(text.str());
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("--key: ", key, ": ", parsed.status().message()));
    return parsed;
  }
  absl::StatusOr<Ed25519PublicKey> parsed = Ed25519PublicKey::FromBase64(key);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--key: \"", key, "\" is neither a PEM public key file nor base64 (",
                                                   parsed.status().message(), ")"));
  }
  return parsed;
}

// file:// anywhere this user may read, s3:// with the AWS environment (none configured: s3:// URIs are refused).
std::shared_ptr<storage::ObjectStore> ReaderStore() {
  storage::StorageOptions options;
  options.file_roots.emplace_back("/");
  absl::StatusOr<storage::S3Config> s3 = storage::LoadS3Config(storage::ProcessEnvironment());
  if (s3.ok()) options.s3 = *s3;
  return storage::MakeObjectStore(options);
}

void PrintCheck(CommandContext& ctx, const std::string& uri, const storage::ManifestCheck& check) {
  if (ctx.json) {
    *ctx.out << nlohmann::json{{"manifest_uri", uri}, {"verified", check.ok()}, {"key_id", check.key_id},
                               {"files_checked", check.files_checked}, {"problems", check.problems}}
                    .dump()
             << "\n";
  } else if (check.ok()) {
    *ctx.out << "verified: " << uri << "\n  signed by key " << check.key_id << " (ed25519)\n  "
             << check.files_checked << " files match their size and SHA-256\n";
  } else {
    *ctx.out << "NOT VERIFIED: " << uri << "\n";
  }
  for (const std::string& problem : check.problems) *ctx.err << "quarkctl: verify: " << problem << "\n";
}

}  // namespace

int KeyCommand(CommandContext& ctx) {
  absl::StatusOr<quark::v1::SigningKey> key = FetchSigningKey(ctx);
  if (!key.ok()) {
    *ctx.err << "quarkctl: " << key.status().message() << "\n";
    return kExitRpcError;
  }
  if (ctx.json) {
    *ctx.out << ToJsonLine(*key) << "\n";
  } else {
    *ctx.out << "key_id:     " << key->key_id() << "\nalgorithm:  " << key->algorithm()
             << "\npublic_key: " << key->public_key() << "\n" << key->public_key_pem();
  }
  return kExitOk;
}

int VerifyCommand(CommandContext& ctx, const std::string& manifest_uri, const std::vector<std::string>& key_files) {
  std::vector<Ed25519PublicKey> trusted;
  for (const std::string& key : key_files) {
    absl::StatusOr<Ed25519PublicKey> loaded = LoadKey(key);
    if (!loaded.ok()) {
      *ctx.err << "quarkctl: " << loaded.status().message() << "\n";
      return kExitUsage;
    }
    trusted.push_back(*std::move(loaded));
  }
  if (trusted.empty()) {  // quarkd's own key
    absl::StatusOr<quark::v1::SigningKey> key = FetchSigningKey(ctx);
    absl::StatusOr<Ed25519PublicKey> parsed =
        key.ok() ? Ed25519PublicKey::FromBase64(key->public_key()) : absl::StatusOr<Ed25519PublicKey>(key.status());
    if (!parsed.ok()) {
      *ctx.err << "quarkctl: " << parsed.status().message() << " (or pass --key)\n";
      return kExitRpcError;
    }
    trusted.push_back(*std::move(parsed));
  }
  std::shared_ptr<storage::ObjectStore> store = ReaderStore();
  absl::StatusOr<storage::ManifestCheck> check = storage::VerifyManifest(*store, manifest_uri, trusted);
  if (!check.ok()) {
    *ctx.err << "quarkctl: verify: " << check.status().message() << "\n";
    return kExitNotVerified;
  }
  PrintCheck(ctx, manifest_uri, *check);
  return check->ok() ? kExitOk : kExitNotVerified;
}

}  // namespace quark::client
