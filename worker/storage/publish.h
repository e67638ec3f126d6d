// Atomic publish of a job's artifacts: every file first, manifest.json last.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "worker/storage/object_store.h"

namespace quark {
class Ed25519Signer;
}  // namespace quark

namespace quark::storage {

/// The parts of manifest.json that the caller knows (the file list is computed).
struct ManifestInfo {
  std::string job_id;
  /// The resolved quantization config (any JSON); null leaves the field out.
  nlohmann::json config;
  /// e.g. ppl_before, ppl_after, seconds_total.
  std::map<std::string, double> metrics;
  /// Further top-level fields (model_uri, export formats, versions); must not reuse the names above.
  nlohmann::json extra = nlohmann::json::object();
  /// Signs the manifest (a "signature" field, manifest_signature.h) when set; not owned, outlives the call.
  const Ed25519Signer* signer = nullptr;
};

struct PublishedFile {
  std::string path;  // relative to the prefix, '/'-separated
  std::string uri;
  int64_t size_bytes = 0;
  std::string sha256;  // hex
};

struct PublishResult {
  std::vector<PublishedFile> files;  // sorted by path; manifest.json not included
  std::string manifest_uri;
  std::string manifest_sha256;  // hex, of the manifest.json bytes stored (quarkd re-checks it before dedup, #29)
};

/// Called after each file with (files done, files total, bytes done, bytes total).
using PublishProgress = std::function<void(int, int, int64_t, int64_t)>;

/// Uploads every regular file under `dir` (recursively) to `output_prefix`/<relative path>, checks each arrived
/// with its size (Head), then writes `output_prefix`/manifest.json:
///   {"format_version": 1, "job_id", "created_at" (RFC 3339 UTC), "files": [{"path", "size_bytes", "sha256"}],
///    "config", "metrics", ...extra, "signature" (with manifest.signer)}
/// A manifest.json already under the prefix is deleted first, and none is written unless every file arrived, so
/// a reader that sees a manifest sees a complete artifact. `cancelled` (optional) is polled between files:
/// CANCELLED. Errors name the file and the store's error; a file named manifest.json in `dir` is INVALID_ARGUMENT.
absl::StatusOr<PublishResult> PublishArtifacts(ObjectStore& store, const std::filesystem::path& dir,
                                               std::string_view output_prefix, const ManifestInfo& manifest,
                                               const PublishProgress& progress = {},
                                               const std::function<bool()>& cancelled = {});

/// #33 item 2, fencing: the folder one attempt of a job publishes into, <output_uri>/<job_id>/attempt-<attempt>
/// (`attempt` is the job's attempt number, Job.attempts_size() under its lease). Attempts never write into each
/// other's folders, so a stale attempt cannot overwrite a newer one's artifacts; quarkd takes a result only from
/// the lease of the current attempt and only inside that attempt's folder (server/scheduler/result_check.h).
std::string AttemptOutputPrefix(std::string_view output_uri, std::string_view job_id, int attempt);

/// #36: where quarkd writes a sweep's (or an automatic search's) parent manifest, <output_uri>/<job_id>/manifest.json
/// (server/scheduler/sweep_manifest.h): beside its children's folders under the same output URI, in the parent's own.
std::string SweepManifestUri(std::string_view output_uri, std::string_view job_id);

/// Removes what one attempt published under `prefix` (its AttemptOutputPrefix): manifest.json first, so that no
/// reader sees a manifest whose files are going, then every other object below it. Errors name the URI; what could
/// be removed is removed.
absl::Status RemovePublished(ObjectStore& store, std::string_view prefix);

/// The manifest document PublishArtifacts writes (exposed for tests and for readers checking an artifact).
nlohmann::json BuildManifest(const std::vector<PublishedFile>& files, const ManifestInfo& manifest);

}  // namespace quark::storage
