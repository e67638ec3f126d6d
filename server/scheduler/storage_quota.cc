#include "server/scheduler/storage_quota.h"

#include "absl/strings/str_cat.h"

namespace quark::server {

absl::StatusOr<quark::v1::Job> RepeatedRequestOr(JobStore& store, const std::string& tenant,
                                                 const std::string& request_id, absl::Status refusal) {
  if (!request_id.empty()) {
    absl::StatusOr<StoredJob> existing = store.FindByRequestId(tenant, request_id);
    if (existing.ok()) return existing->job;
  }
  return refusal;
}

absl::StatusOr<std::optional<quark::v1::Job>> CheckStoredBytesQuota(JobStore& store, const SubmitOptions& options,
                                                                   const std::string& request_id,
                                                                   int64_t needed_bytes) {
  if (options.max_stored_bytes <= 0) return std::nullopt;
  absl::StatusOr<int64_t> used = store.TenantStoredBytes(options.tenant);
  if (!used.ok()) return used.status();
  if (*used + needed_bytes <= options.max_stored_bytes) return std::nullopt;
  return RepeatedRequestOr(store, options.tenant, request_id, absl::ResourceExhaustedError(absl::StrCat(
      "tenant ", options.tenant, ": quota max_stored_bytes=", options.max_stored_bytes, " reached (", *used,
      " bytes stored, ", needed_bytes, " more needed); DeleteJob frees a finished or cancelled job's bytes")));
}

}  // namespace quark::server
