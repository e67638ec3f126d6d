#include "server/security/authenticator.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <grpcpp/security/auth_context.h>
#include <grpcpp/server_context.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/log_text.h"

namespace quark::server {
namespace {

constexpr char kBearer[] = "Bearer ";
constexpr size_t kMaxTokenBytes = 4096;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("tokens-file: cannot read \"", path, "\""));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The verified identities of the peer's client certificate: its common name and subject alternative names.
std::vector<std::string> PeerIdentities(const grpc::ServerContextBase& context) {
  std::vector<std::string> out;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return out;
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) out.emplace_back(value.data(), value.size());
  }
  return out;
}

}  // namespace

std::string BearerToken(const std::string& header) {
  if (header.size() <= sizeof(kBearer) - 1 || !absl::StartsWithIgnoreCase(header, kBearer)) return "";
  return header.substr(sizeof(kBearer) - 1);
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Create(const std::string& tokens_file) {
  std::unique_ptr<Authenticator> auth(new Authenticator(tokens_file));
  if (tokens_file.empty()) return auth;
  absl::Status status = auth->Reload();
  if (!status.ok()) return status;
  return auth;
}

absl::Status Authenticator::Reload() {
  struct stat info {};
  if (stat(path_.c_str(), &info) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tokens-file: cannot stat \"", path_, "\""));
  }
  absl::StatusOr<std::string> text = ReadFile(path_);
  if (!text.ok()) return text.status();
  absl::StatusOr<SecurityConfig> parsed = ParseSecurityConfig(*text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tokens-file \"", path_, "\": ", parsed.status().message()));
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    log::Get("auth")->warn("job=- tokens-file {} is readable by group or others (chmod 600 it)", path_);
  }
  size_t tokens = parsed->by_token_sha256.size() + parsed->by_identity.size();
  size_t tenants = parsed->tenants.size();
  {
    absl::MutexLock lock(&mu_);
    config_ = std::make_shared<const SecurityConfig>(std::move(*parsed));
    file_size_ = info.st_size;
    file_mtime_ = info.st_mtim;
  }
  log::Get("auth")->info("job=- tokens-file {} loaded: {} principals, {} tenants", path_, tokens, tenants);
  return absl::OkStatus();
}

bool Authenticator::ReloadIfChanged() {
  if (path_.empty()) return false;
  struct stat info {};
  if (stat(path_.c_str(), &info) != 0) return false;
  {
    absl::MutexLock lock(&mu_);
    if (info.st_size == file_size_ && info.st_mtim.tv_sec == file_mtime_.tv_sec &&
        info.st_mtim.tv_nsec == file_mtime_.tv_nsec) {
      return false;
    }
  }
  absl::Status status = Reload();
  if (!status.ok()) {
    log::Get("auth")->error("job=- keeping the previous tokens: {}", ForLog(status.ToString()));
    absl::MutexLock lock(&mu_);
    file_size_ = info.st_size;  // do not retry a bad file every second; the next change is read again
    file_mtime_ = info.st_mtim;
    return false;
  }
  return true;
}

std::string Authenticator::MintLocalWorkerToken() {
  std::string token = NewRandomToken();
  absl::MutexLock lock(&mu_);
  local_worker_hash_ = Sha256Hex(token);
  return token;
}

absl::StatusOr<Principal> Authenticator::FromToken(const std::string& token) const {
  std::string hash = Sha256Hex(token);
  absl::MutexLock lock(&mu_);
  if (!local_worker_hash_.empty() && ConstantTimeEquals(hash, local_worker_hash_)) {
    return Principal{kLocalWorkerPrincipal, "", Role::kWorker, false};
  }
  auto it = config_->by_token_sha256.find(hash);
  if (it == config_->by_token_sha256.end()) return absl::UnauthenticatedError("unknown bearer token");
  return it->second;
}

absl::StatusOr<Principal> Authenticator::Authenticate(const grpc::ServerContextBase& context) const {
  if (path_.empty()) return Principal{"anonymous", "", Role::kAdmin, true};
  const auto& metadata = context.client_metadata();
  auto header = metadata.find("authorization");
  if (header != metadata.end()) {
    if (header->second.size() > kMaxTokenBytes) return absl::UnauthenticatedError("authorization: header too long");
    std::string token = BearerToken(std::string(header->second.data(), header->second.size()));
    if (token.empty()) return absl::UnauthenticatedError("authorization: expected \"Bearer TOKEN\"");
    return FromToken(token);
  }
  std::vector<std::string> identities = PeerIdentities(context);
  absl::MutexLock lock(&mu_);
  for (const std::string& identity : identities) {
    auto it = config_->by_identity.find(identity);
    if (it != config_->by_identity.end()) return it->second;
  }
  return absl::UnauthenticatedError(
      "missing bearer token (send metadata \"authorization: Bearer TOKEN\"; quarkctl --token or $QUARK_TOKEN)");
}

absl::StatusOr<Principal> Authenticator::Authorize(const grpc::ServerContextBase& context, Role minimum,
                                                   const std::string& what) const {
  absl::StatusOr<Principal> principal = Authenticate(context);
  if (!principal.ok()) return principal;
  if (!principal->Has(minimum)) {
    return absl::PermissionDeniedError(absl::StrCat(what, ": ", principal->name, " has role ",
                                                    RoleName(principal->role), "; ", RoleName(minimum),
                                                    minimum == Role::kWorker ? " required" : " or above required"));
  }
  return principal;
}

std::optional<TenantPolicy> Authenticator::Tenant(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = config_->tenants.find(tenant);
  if (it == config_->tenants.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<const SecurityConfig> Authenticator::config() const {
  absl::MutexLock lock(&mu_);
  return config_;
}

}  // namespace quark::server
