// #36 item 1: the manifest of a sweep's (or an automatic search's) parent. The parent runs nothing itself, so no
// worker publishes for it; quarkd writes <spec.output_uri>/<parent id>/manifest.json when the parent ends, in the
// children's manifest format (format_version 1, job_id, created_at, files, metrics, signature), holding the
// comparison table: one row per child with its figures and its own manifest's URI and SHA-256, the float model's
// figures, the failed or dropped children with their errors, and for a search the recipe, the rounds (predicted vs
// measured loss) and which rows were sensitivity passes.
//
// The document is a function of the stored parent and children only (created_at is the last child's end, not the
// time of writing), so a quarkd restarted between writing it and storing the parent's end writes the same bytes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"

namespace quark {
class Ed25519Signer;
namespace storage {
class ObjectStore;
}  // namespace storage
}  // namespace quark

namespace quark::server {

/// The store a parent's manifest is written through: quarkd's own (file:// confined to --allowed-roots, s3:// with
/// its environment's keys), narrowed to the parent's tenant (its output prefixes, its storage keys) as a lease of
/// the tenant's children is (server/api/sweep_manifest_store.h). Errors name the tenant or the setting.
using ParentStoreFor =
    std::function<absl::StatusOr<std::shared_ptr<storage::ObjectStore>>(const quark::v1::Job& parent)>;

struct WrittenManifest {
  std::string uri;
  std::string sha256;  // hex, of the bytes stored
};

/// The parent's manifest document. `parent` carries its final state, error and result (its metrics); `children`
/// are the stored jobs its rows name (any order; a row whose child is missing gets no manifest fields).
nlohmann::json BuildSweepManifest(const quark::v1::Job& parent, const std::vector<quark::v1::Job>& children);

class SweepManifestWriter {
 public:
  /// `signer` (may be null: unsigned) signs as the workers sign theirs (worker/storage/manifest_signature.h).
  SweepManifestWriter(ParentStoreFor store_for, std::shared_ptr<const Ed25519Signer> signer);

  /// Builds the document and writes it, whole or not at all (ObjectStore::PutBytes replaces atomically), to
  /// SweepManifestUri(spec.output_uri, parent id). The URI is checked first as a worker checks its job's output URI
  /// (tenant_object_store.h's CheckUnderPrefixes: below <output_uri>/<id>, no "." or ".." segment):
  /// PERMISSION_DENIED naming spec.output_uri. Store errors (a file:// path outside the roots) name the URI.
  absl::StatusOr<WrittenManifest> Write(const quark::v1::Job& parent,
                                        const std::vector<quark::v1::Job>& children) const;

 private:
  ParentStoreFor store_for_;
  std::shared_ptr<const Ed25519Signer> signer_;
};

}  // namespace quark::server
