// A bounded local cache of model folders: file:// models are read in place, s3:// ones downloaded once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "worker/storage/object_store.h"
#include "worker/storage/pinned_folder.h"

namespace quark::storage {

/// Called during a download with (bytes done, bytes total).
using FetchProgress = std::function<void(int64_t, int64_t)>;

/// A model folder ready for the engine: `dir` is read by name; for a file:// model it is the view of `pinned`,
/// which must outlive every read.
struct LocalModel {
  std::filesystem::path dir;
  std::shared_ptr<PinnedFolder> pinned;
};

/// Thread-safe within a process; processes sharing one cache folder serialise on an flock(2) of "<dir>/.lock".
/// Entries are "<dir>/<hash of the uri>/" plus a ".done" marker whose mtime is the last use; least recently used
/// entries are evicted to keep the total under max_bytes. An entry in use by another process can be evicted
/// (its open files stay readable on Linux).
class ModelCache {
 public:
  ModelCache(std::shared_ptr<ObjectStore> store, std::filesystem::path dir, int64_t max_bytes);

  /// A local folder holding the model at `uri`. file://: the confined path itself (NOT_FOUND
  /// "model_uri: file:///x: no such directory" when absent). s3://: every object under the prefix, downloaded
  /// (NOT_FOUND when the prefix is empty; RESOURCE_EXHAUSTED when the model alone exceeds max_bytes; CANCELLED
  /// when `cancelled` turns true between files).
  absl::StatusOr<std::filesystem::path> Fetch(std::string_view uri, const FetchProgress& progress = {},
                                              const std::function<bool()>& cancelled = {});
  /// Fetch through `store` (a lease's own store) instead of the cache's. `scope` names who reads (the S3
  /// endpoint and access key id): entries are kept per scope, so a model downloaded with one tenant's keys is
  /// never handed to a job running with another's. "" is the cache's own store's scope.
  absl::StatusOr<std::filesystem::path> Fetch(ObjectStore& store, std::string_view scope, std::string_view uri,
                                              const FetchProgress& progress = {},
                                              const std::function<bool()>& cancelled = {});

  /// Fetch for a job that reads the model later: a file:// model is pinned (ObjectStore::PinFolder) with its view
  /// at `view_dir`, so nothing swapped into the tenant's folder after this call is read; s3:// as Fetch.
  absl::StatusOr<LocalModel> FetchPinned(ObjectStore& store, std::string_view scope, std::string_view uri,
                                         const std::filesystem::path& view_dir, const FetchProgress& progress = {},
                                         const std::function<bool()>& cancelled = {});

  /// Bytes currently held by complete entries.
  int64_t UsedBytes() const;

 private:
  absl::StatusOr<std::filesystem::path> Download(ObjectStore& store, std::string_view uri, const std::filesystem::path& entry,
                                                 const FetchProgress& progress, const std::function<bool()>& cancelled);
  absl::Status EvictFor(int64_t needed, const std::filesystem::path& keep);

  std::shared_ptr<ObjectStore> store_;
  std::filesystem::path dir_;
  int64_t max_bytes_;
  std::mutex mu_;
};

}  // namespace quark::storage
