// Who may call quarkd: the tokens file (JSON) read into principals (token hash or mTLS identity -> tenant +
// role) and per-tenant policies (model roots, output prefixes, quotas, storage credentials). No gRPC here, so
// the parser can be fuzzed alone.
//
//   {"tokens": [{"name": "acme-ci", "sha256": "<64 hex digits>", "tenant": "acme", "role": "submitter"},
//               {"name": "gpu-1", "mtls_identity": "worker-1.example", "role": "worker"}],
//    "tenants": {"acme": {"model_roots": ["file:///srv/models/acme", "s3://acme-models/"],
//                         "output_prefixes": ["s3://acme-out/quantized/"],
//                         "max_queued_jobs": 20, "max_running_jobs": 2, "max_stored_bytes": 1073741824,
//                         "storage": {"access_key_id": "...", "secret_access_key": "..."}}}}
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "quark/v1/worker.pb.h"

namespace quark::server {

/// viewer < submitter < admin; worker is apart (the worker protocol only).
enum class Role { kViewer = 1, kSubmitter = 2, kAdmin = 3, kWorker = 4 };

/// "viewer", "submitter", "admin", "worker".
std::string RoleName(Role role);

/// The principal of quarkd's own local workers (their token is minted at start, in no file). No entry of a tokens
/// file may take this name, and only this principal may act as a local worker id (worker_binding.h).
inline constexpr char kLocalWorkerPrincipal[] = "local-worker";
/// The principal of quarkd's own retention sweeps in the audit log (#29, job_retention.h); no tokens-file entry may
/// take this name either.
inline constexpr char kRetentionPrincipal[] = "quarkd-retention";

/// Who a call comes from. Never holds the token itself.
struct Principal {
  std::string name;    // the token's name or the mTLS identity ("anonymous" with authentication off)
  std::string tenant;  // "" for workers, tenant-less admins and anonymous callers
  Role role = Role::kViewer;
  bool anonymous = false;  // authentication is off

  /// Whether this principal may do what `minimum` may: workers only worker calls, others by rank.
  bool Has(Role minimum) const;
  /// Admins (and anonymous callers with authentication off) see every tenant's jobs.
  bool SeesAllTenants() const { return role == Role::kAdmin; }
};

/// What one tenant may touch. Empty lists and zero quotas mean "no limit beyond quarkd's own".
struct TenantPolicy {
  std::vector<std::string> model_roots;      // file:///dir or s3://bucket/prefix: model, calibration, evaluation
  std::vector<std::string> output_prefixes;  // file:///dir or s3://bucket/prefix: output_uri
  int64_t max_queued_jobs = 0;               // SubmitJob: RESOURCE_EXHAUSTED at this many queued jobs
  int64_t max_running_jobs = 0;              // the scheduler leases no more of the tenant's jobs at once
  /// SubmitJob: RESOURCE_EXHAUSTED once the tenant's jobs (any state, until DeleteJob) and their events hold this
  /// many bytes in the store (JobStore::TenantStoredBytes).
  int64_t max_stored_bytes = 0;
  quark::v1::internal::StorageCredentials storage;  // sent with leases of this tenant's jobs; empty = none
};

struct SecurityConfig {
  std::map<std::string, Principal> by_token_sha256;  // lower-case hex SHA-256 of the token
  std::map<std::string, Principal> by_identity;      // mTLS certificate common name or SAN
  std::map<std::string, TenantPolicy> tenants;
};

/// Parses the tokens file. INVALID_ARGUMENT naming the JSON path ("tokens[2].role: ...") for any bad entry:
/// unknown keys, a hash that is not 64 hex digits, a duplicate hash or identity, an unknown role, a tenant name
/// outside [A-Za-z0-9._-]{1,64}, a viewer or submitter without a tenant, a root that is not file:///abs or
/// s3://bucket/..., a negative quota.
absl::StatusOr<SecurityConfig> ParseSecurityConfig(std::string_view json);

/// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

/// Equal contents, in time independent of where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

/// A fresh random token: "qk_" + 43 base64url characters (256 bits).
std::string NewRandomToken();

}  // namespace quark::server
