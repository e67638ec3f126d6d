#include "server/security/security_config.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace quark::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxTenantBytes = 64;
constexpr size_t kMaxNameBytes = 256;

absl::Status Bad(const std::string& path, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

absl::Status CheckKeys(const json& object, const std::string& path, const std::set<std::string>& allowed) {
  if (!object.is_object()) return Bad(path, "expected an object");
  for (const auto& item : object.items()) {
    if (!allowed.count(item.key())) return Bad(absl::StrCat(path, ".", item.key()), "unknown key");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GetString(const json& object, const std::string& key, const std::string& path) {
  auto it = object.find(key);
  if (it == object.end()) return std::string();
  if (!it->is_string()) return Bad(absl::StrCat(path, ".", key), "expected a string");
  std::string value = it->get<std::string>();
  if (value.size() > 4096) return Bad(absl::StrCat(path, ".", key), "longer than 4096 bytes");
  return value;
}

bool IsTenantName(const std::string& name) {
  if (name.empty() || name.size() > kMaxTenantBytes) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsHexSha256(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::StatusOr<Role> ParseRole(const std::string& name, const std::string& path) {
  if (name == "viewer") return Role::kViewer;
  if (name == "submitter") return Role::kSubmitter;
  if (name == "admin") return Role::kAdmin;
  if (name == "worker") return Role::kWorker;
  return Bad(path, absl::StrCat("\"", name, "\" is not viewer, submitter, admin or worker"));
}

absl::Status ParseToken(const json& entry, const std::string& path, SecurityConfig* config) {
  absl::Status status = CheckKeys(entry, path, {"name", "sha256", "mtls_identity", "tenant", "role"});
  if (!status.ok()) return status;
  absl::StatusOr<std::string> name = GetString(entry, "name", path);
  absl::StatusOr<std::string> hash = GetString(entry, "sha256", path);
  absl::StatusOr<std::string> identity = GetString(entry, "mtls_identity", path);
  absl::StatusOr<std::string> tenant = GetString(entry, "tenant", path);
  absl::StatusOr<std::string> role_name = GetString(entry, "role", path);
  for (const auto* field : {&name, &hash, &identity, &tenant, &role_name}) {
    if (!field->ok()) return field->status();
  }
  if (name->size() > kMaxNameBytes) return Bad(path + ".name", "longer than 256 bytes");
  absl::StatusOr<Role> role = ParseRole(*role_name, path + ".role");
  if (!role.ok()) return role.status();
  Principal principal;
  principal.role = *role;
  principal.tenant = *tenant;
  if (!tenant->empty() && !IsTenantName(*tenant)) {
    return Bad(path + ".tenant", absl::StrCat("\"", *tenant, "\" is not 1-64 characters of [A-Za-z0-9._-]"));
  }
  if ((*role == Role::kViewer || *role == Role::kSubmitter) && tenant->empty()) {
    return Bad(path + ".tenant", absl::StrCat("required for role ", *role_name));
  }
  if (*role == Role::kWorker && !tenant->empty()) return Bad(path + ".tenant", "workers belong to no tenant");
  if (hash->empty() == identity->empty()) return Bad(path, "needs exactly one of \"sha256\" and \"mtls_identity\"");
  if (!hash->empty()) {
    if (!IsHexSha256(*hash)) return Bad(path + ".sha256", "expected 64 lower-case hex digits (sha256sum of the token)");
    principal.name = name->empty() ? absl::StrCat("token-", hash->substr(0, 8)) : *name;
  } else {
    principal.name = name->empty() ? *identity : *name;
  }
  if (principal.name == kLocalWorkerPrincipal) {
    return Bad(path + ".name", absl::StrCat("\"", kLocalWorkerPrincipal, "\" is the name of quarkd's own local workers"));
  }
  if (principal.name == kRetentionPrincipal) {
    return Bad(path + ".name", absl::StrCat("\"", kRetentionPrincipal, "\" is the name of quarkd's retention sweeps"));
  }
  if (!hash->empty()) {
    if (!config->by_token_sha256.emplace(*hash, principal).second) return Bad(path + ".sha256", "listed twice");
  } else {
    if (!config->by_identity.emplace(*identity, principal).second) return Bad(path + ".mtls_identity", "listed twice");
  }
  return absl::OkStatus();
}

absl::Status ParseRoots(const json& tenant, const std::string& key, const std::string& path,
                        std::vector<std::string>* out) {
  auto it = tenant.find(key);
  if (it == tenant.end()) return absl::OkStatus();
  if (!it->is_array()) return Bad(absl::StrCat(path, ".", key), "expected a list of URIs");
  for (size_t i = 0; i < it->size(); ++i) {
    std::string where = absl::StrCat(path, ".", key, "[", i, "]");
    const json& root = (*it)[i];
    if (!root.is_string()) return Bad(where, "expected a string");
    std::string uri = root.get<std::string>();
    bool file = absl::StartsWith(uri, "file:///");
    bool s3 = absl::StartsWith(uri, "s3://") && uri.size() > 5 && uri[5] != '/';
    if (!file && !s3) return Bad(where, absl::StrCat("\"", uri, "\" is not file:///ABSOLUTE/DIR or s3://BUCKET/PREFIX"));
    if (absl::StrContains(uri, "..") || absl::StrContains(uri, "%")) {
      return Bad(where, absl::StrCat("\"", uri, "\" must not contain \"..\" or percent escapes"));
    }
    out->push_back(uri);
  }
  return absl::OkStatus();
}

absl::Status ParseQuota(const json& tenant, const std::string& key, const std::string& path, int64_t* out) {
  auto it = tenant.find(key);
  if (it == tenant.end()) return absl::OkStatus();
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return Bad(absl::StrCat(path, ".", key), "expected a non-negative integer (0 = no limit)");
  }
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ParseStorage(const json& tenant, const std::string& path, TenantPolicy* policy) {
  auto it = tenant.find("storage");
  if (it == tenant.end()) return absl::OkStatus();
  std::string where = path + ".storage";
  absl::Status status =
      CheckKeys(*it, where, {"access_key_id", "secret_access_key", "session_token", "region", "endpoint"});
  if (!status.ok()) return status;
  quark::v1::internal::StorageCredentials& out = policy->storage;
  struct Field {
    const char* key;
    void (quark::v1::internal::StorageCredentials::*set)(const std::string&);
  };
  const Field fields[] = {{"access_key_id", &quark::v1::internal::StorageCredentials::set_access_key_id},
                          {"secret_access_key", &quark::v1::internal::StorageCredentials::set_secret_access_key},
                          {"session_token", &quark::v1::internal::StorageCredentials::set_session_token},
                          {"region", &quark::v1::internal::StorageCredentials::set_region},
                          {"endpoint", &quark::v1::internal::StorageCredentials::set_endpoint}};
  for (const Field& field : fields) {
    absl::StatusOr<std::string> value = GetString(*it, field.key, where);
    if (!value.ok()) return value.status();
    (out.*field.set)(*value);
  }
  if (out.access_key_id().empty() != out.secret_access_key().empty()) {
    return Bad(where, "access_key_id and secret_access_key go together");
  }
  return absl::OkStatus();
}

absl::Status ParseTenant(const std::string& name, const json& tenant, const std::string& path, SecurityConfig* config) {
  if (!IsTenantName(name)) return Bad(path, "tenant names are 1-64 characters of [A-Za-z0-9._-]");
  absl::Status status = CheckKeys(tenant, path,
                                  {"model_roots", "output_prefixes", "max_queued_jobs", "max_running_jobs", "storage",
                                   "max_stored_bytes"});
  TenantPolicy policy;
  if (status.ok()) status = ParseRoots(tenant, "model_roots", path, &policy.model_roots);
  if (status.ok()) status = ParseRoots(tenant, "output_prefixes", path, &policy.output_prefixes);
  if (status.ok()) status = ParseQuota(tenant, "max_queued_jobs", path, &policy.max_queued_jobs);
  if (status.ok()) status = ParseQuota(tenant, "max_running_jobs", path, &policy.max_running_jobs);
  if (status.ok()) status = ParseQuota(tenant, "max_stored_bytes", path, &policy.max_stored_bytes);
  if (status.ok()) status = ParseStorage(tenant, path, &policy);
  if (!status.ok()) return status;
  config->tenants[name] = std::move(policy);
  return absl::OkStatus();
}

}  // namespace

std::string RoleName(Role role) {
  switch (role) {
    case Role::kViewer: return "viewer";
    case Role::kSubmitter: return "submitter";
    case Role::kAdmin: return "admin";
    case Role::kWorker: return "worker";
  }
  return "unknown";
}

bool Principal::Has(Role minimum) const {
  if (anonymous) return true;  // authentication off: everyone may do everything, as before tokens existed
  if (minimum == Role::kWorker || role == Role::kWorker) return role == minimum;
  return static_cast<int>(role) >= static_cast<int>(minimum);
}

absl::StatusOr<SecurityConfig> ParseSecurityConfig(std::string_view text) {
  json root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("tokens file: not valid JSON");
  absl::Status status = CheckKeys(root, "tokens file", {"tokens", "tenants"});
  if (!status.ok()) return status;
  SecurityConfig config;
  if (auto tokens = root.find("tokens"); tokens != root.end()) {
    if (!tokens->is_array()) return Bad("tokens", "expected a list");
    for (size_t i = 0; i < tokens->size(); ++i) {
      status = ParseToken((*tokens)[i], absl::StrCat("tokens[", i, "]"), &config);
      if (!status.ok()) return status;
    }
  }
  if (auto tenants = root.find("tenants"); tenants != root.end()) {
    if (!tenants->is_object()) return Bad("tenants", "expected an object of tenant name -> policy");
    for (const auto& item : tenants->items()) {
      status = ParseTenant(item.key(), item.value(), absl::StrCat("tenants.", item.key()), &config);
      if (!status.ok()) return status;
    }
  }
  return config;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string NewRandomToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) std::abort();  // no entropy: nothing safe to hand out
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out = "qk_";
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char byte : bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(buffer >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (6 - bits)) & 63]);
  return out;
}

}  // namespace quark::server
