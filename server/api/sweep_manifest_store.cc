#include "server/api/sweep_manifest_store.h"

#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/api/access_control.h"
#include "server/security/authenticator.h"
#include "worker/storage/file_object_store.h"
#include "worker/storage/routing_object_store.h"
#include "worker/storage/s3_object_store.h"
#include "worker/storage/tenant_object_store.h"

namespace quark::server {

ParentStoreFor MakeParentStoreFor(std::vector<std::string> allowed_roots, std::optional<storage::S3Config> s3,
                                  const AccessControl* access) {
  std::vector<std::filesystem::path> roots(allowed_roots.begin(), allowed_roots.end());
  return [roots = std::move(roots), s3 = std::move(s3),
          access](const quark::v1::Job& parent) -> absl::StatusOr<std::shared_ptr<storage::ObjectStore>> {
    std::optional<storage::S3Config> config = s3;
    std::optional<TenantPolicy> policy;
    if (access != nullptr && !parent.tenant().empty()) {
      // The tenant's keys replace quarkd's as they replace a worker's for the tenant's leases.
      if (auto keys = access->StorageCredentialsFor(parent.tenant())) {
        if (keys->access_key_id().empty() != keys->secret_access_key().empty()) {
          return absl::InvalidArgumentError(absl::StrCat("tenant ", parent.tenant(),
                                                         ": storage: access_key_id and secret_access_key: only one "
                                                         "of them is set"));
        }
        if (!config) config = storage::S3Config{};
        config->credentials.access_key_id = keys->access_key_id();
        config->credentials.secret_access_key = keys->secret_access_key();
        config->credentials.session_token = keys->session_token();
        if (!keys->region().empty()) config->region = keys->region();
        if (!keys->endpoint().empty()) config->endpoint = keys->endpoint();
      }
      policy = access->authenticator()->Tenant(parent.tenant());
    }
    std::unique_ptr<storage::ObjectStore> s3_store;
    if (config) s3_store = std::make_unique<storage::S3ObjectStore>(*config);
    auto base = std::make_shared<storage::RoutingObjectStore>(
        std::make_unique<storage::FileObjectStore>(roots, storage::FileObjectStore::Roots::kKeepMissing),
        std::move(s3_store));
    if (!policy || policy->output_prefixes.empty()) return std::shared_ptr<storage::ObjectStore>(base);
    auto tenant = std::make_shared<storage::TenantObjectStore>(
        base, storage::TenantRoots{policy->model_roots, policy->output_prefixes}, roots);
    if (absl::Status inside = tenant->CheckWrite("spec.output_uri", parent.spec().output_uri()); !inside.ok()) {
      return inside;
    }
    return std::shared_ptr<storage::ObjectStore>(std::move(tenant));
  };
}

}  // namespace quark::server
