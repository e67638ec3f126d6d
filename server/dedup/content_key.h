// The content key of a job (deduplication, #17): two jobs of one tenant with equal keys would produce the same
// artifacts, so the second returns (or follows) the first instead of running.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"
#include "server/dedup/file_digest_cache.h"

namespace quark::server {

/// A key, or why the spec gets none.
struct ContentKey {
  std::string key;          // lower-case hex SHA-256; "" when not keyed
  std::string not_keyed;    // why not, for the log ("model_uri: s3:// objects are not digested by quarkd")
};

/// SHA-256 over a canonical listing of: the engine version (QUARK_ENGINE_VERSION); every regular file of a
/// file:// model folder (relative path, size, SHA-256; sorted by path); the resolved Config (preset or inline,
/// kv_cache_dtype, the exclude list sorted, the spec's algo_config appended) serialized deterministically; the
/// gguf_type (gguf_pure, gguf_imatrix_from_calibration and the gguf_imatrix_uri file's digest when set); the calibration spec (defaults filled in) and its file's digest; the evaluation spec and its file's
/// digest; the export formats (sorted, hf_quark when empty). Not in it: output_uri (artifacts stay where the first
/// job put them), labels, priority, max_attempts, deadline_seconds, force.
/// Not keyed (key ""): s3:// models or data (quarkd does not list or read buckets; their ETags would need
/// credentials only workers hold), a model folder that is missing or has no files (the job fails in the worker;
/// nothing to share), an unreadable file, or a file or folder (or a symlink in it) leading outside `read_roots`.
/// Every file is read as the job's worker will read it: opened by the O_NOFOLLOW walk inside `read_roots` (the
/// caller's tenant's roots; ModelView for the model, a symlink in it followed only to a target inside them), so a
/// name swapped after the URI checks never makes quarkd read another tenant's file. Errors only for a spec
/// ValidateSubmitRequest would refuse.
absl::StatusOr<ContentKey> ComputeContentKey(const quark::v1::JobSpec& spec, FileDigestCache* cache,
                                             const std::vector<std::string>& read_roots);

}  // namespace quark::server
