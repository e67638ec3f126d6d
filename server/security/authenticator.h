// Authentication and authorization of gRPC calls: the bearer token of the "authorization" metadata (hashed and
// looked up in the tokens file) or, without a token, the verified mTLS client certificate's identity.
// Without a tokens file authentication is off and every caller is an anonymous admin (quarkd's old behaviour).
#pragma once

#include <sys/types.h>

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/security/security_config.h"

namespace grpc {
class ServerContextBase;
}

namespace quark::server {

/// Thread-safe. The config is swapped whole on reload; callers hold a snapshot (shared_ptr) for one call.
class Authenticator {
 public:
  /// `tokens_file` "" = authentication off. INVALID_ARGUMENT naming the file and the entry when it is unreadable
  /// or malformed.
  static absl::StatusOr<std::unique_ptr<Authenticator>> Create(const std::string& tokens_file);

  bool enabled() const { return !path_.empty(); }

  /// Re-reads the tokens file when its size or modification time changed (the server's ticker calls this about
  /// once a second; SIGHUP forces it). A bad file is logged and the previous config kept. True on a reload.
  bool ReloadIfChanged();
  absl::Status Reload();

  /// Mints a token for quarkd's own local workers (role worker), valid until quarkd exits; it is in no file.
  std::string MintLocalWorkerToken();

  /// The caller of `context`: UNAUTHENTICATED "missing bearer token ..." / "unknown bearer token" when
  /// authentication is on and neither a known token nor a known mTLS identity came with the call.
  absl::StatusOr<Principal> Authenticate(const grpc::ServerContextBase& context) const;
  /// Authenticate, then PERMISSION_DENIED naming the principal, its role and `what` ("SubmitJob") when its role
  /// is below `minimum`.
  absl::StatusOr<Principal> Authorize(const grpc::ServerContextBase& context, Role minimum,
                                      const std::string& what) const;

  /// The tenant's policy (std::nullopt: no tenant entry, quarkd's own limits apply).
  std::optional<TenantPolicy> Tenant(const std::string& tenant) const;
  std::shared_ptr<const SecurityConfig> config() const;

 private:
  explicit Authenticator(std::string path) : path_(std::move(path)) {}
  absl::StatusOr<Principal> FromToken(const std::string& token) const;

  const std::string path_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const SecurityConfig> config_ ABSL_GUARDED_BY(mu_) = std::make_shared<SecurityConfig>();
  std::string local_worker_hash_ ABSL_GUARDED_BY(mu_);
  off_t file_size_ ABSL_GUARDED_BY(mu_) = -1;
  timespec file_mtime_ ABSL_GUARDED_BY(mu_) = {0, 0};
};

/// The "Bearer " token of an authorization header value ("" when it is not one).
std::string BearerToken(const std::string& header);

}  // namespace quark::server
