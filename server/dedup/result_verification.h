// Verified dedup (#29): before quarkd hands a succeeded job's result to a later identical job, it checks that what
// the job published is still what the worker reported when it completed.
#pragma once

#include <string>
#include <vector>

#include "quark/v1/service.pb.h"
#include "server/dedup/file_digest_cache.h"
#include "server/store/job_store.h"

namespace quark::server {

struct ResultVerification {
  bool servable = false;
  /// Whether the result can never become servable again (a file changed or went missing): its job should lose its
  /// content key. False for a result that is only not verifiable here (object storage without trust).
  bool stale = false;
  std::string why;  // what was not verified, naming the file (for the log and the new job's events)
};

/// file:// manifest and artifacts: each opened by the O_NOFOLLOW walk inside `roots` (OpenConfinedFile: no link out
/// of them), hashed through `digests` (a file changed since it was hashed — by size, mtime or ctime — is hashed
/// again) and compared with the digests recorded at completion: every artifact's size_bytes and sha256, the manifest
/// with JobResult.manifest_sha256. A result with no recorded digest is not servable. s3:// (any non-file) URIs:
/// quarkd reads no object store, so such a result is servable only with `trust_object_store` (the worker's
/// digests taken as reported), else not servable and not stale.
ResultVerification VerifyResult(const quark::v1::JobResult& result, const std::vector<std::string>& roots,
                                FileDigestCache& digests, bool trust_object_store);

/// Before a keyed submission of `tenant` is deduplicated: the tenant's succeeded job with `key` that the store
/// would hand out (FindByContentKey) must pass VerifyResult; a stale one loses its key (JobStore::ForgetContentKey,
/// logged) and the next is checked, at most 16. Returns whether the scheduler may reuse a succeeded job (false: the
/// job runs; a queued or running match is still followed, it publishes afresh).
bool PrepareVerifiedDedup(JobStore& store, const std::string& tenant, const std::string& key,
                          const std::vector<std::string>& roots, FileDigestCache& digests, bool trust_object_store);

}  // namespace quark::server
