// Per-lease storage: a lease that carries its tenant's storage credentials gets an ObjectStore of its own, built
// from those keys; other leases use the worker's store. The keys live as long as the lease's job and are never
// logged: Redact() takes them out of any text the job sends back.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "quark/v1/worker.pb.h"
#include "worker/storage/object_store.h"
#include "worker/storage/routing_object_store.h"

namespace quark::worker {

/// Whether the lease's credentials ask for a store of their own (any key field set).
bool HasStorageCredentials(const quark::v1::internal::StorageCredentials& credentials);

/// Thread-safe (const after construction).
class LeaseStoreFactory {
 public:
  /// `worker` is the worker's own storage: its file roots, and its S3 settings (endpoint, region, retries,
  /// part sizes) that a lease's credentials override. Without worker S3 settings the defaults apply.
  explicit LeaseStoreFactory(storage::StorageOptions worker) : worker_(std::move(worker)) {}

  /// A fresh store for one lease: the worker's file roots, and S3 with the lease's keys, its endpoint and region
  /// (the worker's own where empty). INVALID_ARGUMENT naming the field (never its value) when only one half of
  /// the key pair is set or the endpoint has no http:// or https:// scheme.
  absl::StatusOr<std::shared_ptr<storage::ObjectStore>> ForCredentials(
      const quark::v1::internal::StorageCredentials& credentials) const;

  /// Who reads through ForCredentials(credentials): the effective endpoint and the access key id, for the model
  /// cache to keep one tenant's downloads apart from another's.
  std::string CacheScope(const quark::v1::internal::StorageCredentials& credentials) const;

  /// `base` (the worker's store or ForCredentials's) confined to the job's tenant's roots within the worker's
  /// file roots, after the lexical check of the job's URIs: PERMISSION_DENIED naming the spec field and the
  /// tenant's roots when one lies outside them. `base` itself when `roots` is empty.
  absl::StatusOr<std::shared_ptr<storage::ObjectStore>> ForTenant(std::shared_ptr<storage::ObjectStore> base,
                                                                  const quark::v1::internal::TenantRoots& roots,
                                                                  const quark::v1::JobSpec& spec) const;

 private:
  storage::StorageOptions worker_;
};

/// `text` with every occurrence of the secret access key, the session token and the access key id replaced by
/// "[redacted]", for errors, progress messages and log lines of a job that ran with `credentials`.
std::string Redact(std::string text, const quark::v1::internal::StorageCredentials& credentials);

}  // namespace quark::worker
