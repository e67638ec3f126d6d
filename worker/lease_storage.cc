#include "worker/lease_storage.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "worker/storage/file_object_store.h"
#include "worker/storage/s3_object_store.h"
#include "worker/storage/tenant_object_store.h"
#include "worker/storage/strings.h"

namespace quark::worker {

namespace internal = quark::v1::internal;

bool HasStorageCredentials(const internal::StorageCredentials& credentials) {
  return !credentials.access_key_id().empty() || !credentials.secret_access_key().empty() ||
         !credentials.session_token().empty();
}

namespace {

storage::S3Config LeaseS3Config(const storage::StorageOptions& worker, const internal::StorageCredentials& credentials) {
  storage::S3Config config = worker.s3.value_or(storage::S3Config{});
  config.credentials.access_key_id = credentials.access_key_id();
  config.credentials.secret_access_key = credentials.secret_access_key();
  config.credentials.session_token = credentials.session_token();
  if (!credentials.region().empty()) config.region = credentials.region();
  if (!credentials.endpoint().empty()) config.endpoint = credentials.endpoint();
  return config;
}

}  // namespace

absl::StatusOr<std::shared_ptr<storage::ObjectStore>> LeaseStoreFactory::ForCredentials(
    const internal::StorageCredentials& credentials) const {
  if (credentials.access_key_id().empty() != credentials.secret_access_key().empty()) {
    return absl::InvalidArgumentError(
        "storage_credentials: access_key_id and secret_access_key: the lease carries only one of them");
  }
  const std::string& endpoint = credentials.endpoint();
  if (!endpoint.empty() && !str::StartsWith(endpoint, "http://") && !str::StartsWith(endpoint, "https://")) {
    return absl::InvalidArgumentError("storage_credentials.endpoint: must start with http:// or https://");
  }
  auto s3 = std::make_unique<storage::S3ObjectStore>(LeaseS3Config(worker_, credentials));
  return std::shared_ptr<storage::ObjectStore>(std::make_shared<storage::RoutingObjectStore>(
      std::make_unique<storage::FileObjectStore>(worker_.file_roots), std::move(s3)));
}

std::string LeaseStoreFactory::CacheScope(const internal::StorageCredentials& credentials) const {
  return str::Cat(LeaseS3Config(worker_, credentials).EffectiveEndpoint(), " ", credentials.access_key_id());
}

absl::StatusOr<std::shared_ptr<storage::ObjectStore>> LeaseStoreFactory::ForTenant(
    std::shared_ptr<storage::ObjectStore> base, const internal::TenantRoots& roots,
    const quark::v1::JobSpec& spec) const {
  storage::TenantRoots tenant{{roots.model_roots().begin(), roots.model_roots().end()},
                              {roots.output_prefixes().begin(), roots.output_prefixes().end()}};
  if (tenant.empty()) return base;
  auto store = std::make_shared<storage::TenantObjectStore>(std::move(base), std::move(tenant), worker_.file_roots);
  struct Read {
    const char* field;
    const std::string& uri;
  };
  for (const Read& read : {Read{"spec.model_uri", spec.model_uri()}, Read{"spec.calibration.uri", spec.calibration().uri()},
                           Read{"spec.evaluation.uri", spec.evaluation().uri()}}) {
    if (read.uri.empty()) continue;
    if (absl::Status status = store->CheckRead(read.field, read.uri); !status.ok()) return status;
  }
  if (absl::Status status = store->CheckWrite("spec.output_uri", spec.output_uri()); !status.ok()) return status;
  return std::shared_ptr<storage::ObjectStore>(std::move(store));
}

std::string Redact(std::string text, const internal::StorageCredentials& credentials) {
  static constexpr std::string_view kRedacted = "[redacted]";
  std::vector<std::string_view> secrets = {credentials.secret_access_key(), credentials.session_token(),
                                           credentials.access_key_id()};
  // Longest first, so a value that is part of another cannot leave the rest of the longer one behind.
  std::sort(secrets.begin(), secrets.end(), [](std::string_view a, std::string_view b) { return a.size() > b.size(); });
  for (std::string_view secret : secrets) {
    if (secret.empty()) continue;
    for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + kRedacted.size())) {
      text.replace(at, secret.size(), kRedacted);
    }
  }
  return text;
}

}  // namespace quark::worker
