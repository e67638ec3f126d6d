#include "server/dedup/result_verification.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/api/model_view.h"
#include "server/api/request_limits.h"
#include "server/api/uri_policy.h"

namespace quark::server {
namespace {

ResultVerification Stale(const std::string& why) { return {false, true, why}; }

// The file at `uri` has `size_bytes` (when >= 0) and `sha256`; else why not (a stale result).
std::optional<ResultVerification> CheckFile(const std::string& uri, int64_t size_bytes, const std::string& sha256,
                                            const std::vector<std::string>& roots, FileDigestCache& digests) {
  const std::string quoted = absl::StrCat("\"", Excerpt(uri), "\"");
  if (sha256.empty()) return Stale(absl::StrCat(quoted, ": no digest was recorded at completion"));
  const std::string path = UriPolicy::FilePath(uri);
  if (path.empty()) return Stale(absl::StrCat(quoted, ": not a file:// URI"));
  absl::StatusOr<storage::UniqueFd> fd = OpenConfinedFile(roots, path);
  if (!fd.ok()) return Stale(absl::StrCat(quoted, ": ", fd.status().message()));
  uint64_t size = 0;
  absl::StatusOr<std::string> digest = digests.Sha256Of(fd->get(), path, &size);
  if (!digest.ok()) return Stale(absl::StrCat(quoted, ": ", digest.status().message()));
  if (size_bytes >= 0 && static_cast<int64_t>(size) != size_bytes) {
    return Stale(absl::StrCat(quoted, ": ", size, " bytes, ", size_bytes, " recorded"));
  }
  if (*digest != sha256) return Stale(absl::StrCat(quoted, ": SHA-256 ", *digest, ", ", sha256, " recorded"));
  return std::nullopt;
}

}  // namespace

ResultVerification VerifyResult(const quark::v1::JobResult& result, const std::vector<std::string>& roots,
                                FileDigestCache& digests, bool trust_object_store) {
  auto is_file = [](const std::string& uri) { return uri.rfind("file://", 0) == 0; };
  bool object_store = !result.manifest_uri().empty() && !is_file(result.manifest_uri());
  for (const quark::v1::Artifact& artifact : result.artifacts()) object_store |= !is_file(artifact.uri());
  if (object_store && !trust_object_store) {
    return {false, false,
            "its artifacts are in an object store, which quarkd does not read (--trust-object-store serves them)"};
  }
  // Trusted object-store URIs are taken on the worker's digests; every file:// one is checked.
  if (!object_store && result.manifest_uri().empty()) return Stale("no manifest was recorded at completion");
  if (is_file(result.manifest_uri())) {
    if (auto bad = CheckFile(result.manifest_uri(), -1, result.manifest_sha256(), roots, digests)) return *bad;
  }
  for (const quark::v1::Artifact& artifact : result.artifacts()) {
    if (!is_file(artifact.uri())) continue;
    if (auto bad = CheckFile(artifact.uri(), artifact.size_bytes(), artifact.sha256(), roots, digests)) return *bad;
  }
  return {true, false, ""};
}

bool PrepareVerifiedDedup(JobStore& store, const std::string& tenant, const std::string& key,
                          const std::vector<std::string>& roots, FileDigestCache& digests, bool trust_object_store) {
  constexpr int kMaxStale = 16;
  for (int i = 0; i < kMaxStale; ++i) {
    absl::StatusOr<quark::v1::Job> match = store.FindByContentKey(tenant, key);
    if (!match.ok() || match->state() != quark::v1::JOB_STATE_SUCCEEDED) return true;  // nothing to hand out
    ResultVerification verified = VerifyResult(match->result(), roots, digests, trust_object_store);
    if (verified.servable) return true;
    log::Get("server")->warn("job={} not reused for an identical submission: {}", match->id(), ForLog(verified.why));
    if (!verified.stale) return false;
    if (absl::Status forgotten = store.ForgetContentKey(match->id()); !forgotten.ok()) {
      log::Get("server")->error("job={} stale dedup entry not dropped: {}", match->id(), ForLog(forgotten.ToString()));
      return false;
    }
  }
  return false;
}

}  // namespace quark::server
