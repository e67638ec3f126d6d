// libFuzzer target for quarkd's tokens file (server/security/security_config.cc: ParseSecurityConfig), the file
// that decides who may do what. Whatever the bytes, parsing returns; what it accepts keeps the file's rules: token
// hashes of 64 lower-case hex digits, a known role, viewers and submitters bound to a tenant, tenant roots that are
// file:///abs or s3://bucket URIs, no negative quota, and nobody taking the local workers' principal.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/security/security_config.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

bool IsLowerHex64(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsRoot(const std::string& uri) {
  return uri.rfind("file:///", 0) == 0 || (uri.rfind("s3://", 0) == 0 && uri.size() > 5 && uri[5] != '/');
}

void CheckPrincipal(const quark::server::Principal& principal) {
  using quark::server::Role;
  Check(principal.role == Role::kViewer || principal.role == Role::kSubmitter || principal.role == Role::kAdmin ||
        principal.role == Role::kWorker);
  if (principal.role == Role::kViewer || principal.role == Role::kSubmitter) Check(!principal.tenant.empty());
  Check(principal.name != quark::server::kLocalWorkerPrincipal);
  Check(!principal.anonymous);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto config = quark::server::ParseSecurityConfig(json);
  if (!config.ok()) {
    Check(config.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  for (const auto& [hash, principal] : config->by_token_sha256) {
    Check(IsLowerHex64(hash));
    CheckPrincipal(principal);
  }
  for (const auto& [identity, principal] : config->by_identity) {
    Check(!identity.empty());
    CheckPrincipal(principal);
  }
  for (const auto& [tenant, policy] : config->tenants) {
    Check(!tenant.empty() && tenant.size() <= 64);
    for (const std::string& root : policy.model_roots) Check(IsRoot(root));
    for (const std::string& prefix : policy.output_prefixes) Check(IsRoot(prefix));
    Check(policy.max_queued_jobs >= 0 && policy.max_running_jobs >= 0);
  }
  return 0;
}
