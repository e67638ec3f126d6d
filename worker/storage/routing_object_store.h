// One ObjectStore for every scheme: file:// and s3:// URIs go to their own store.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "worker/storage/object_store.h"
#include "worker/storage/s3_config.h"

namespace quark::storage {

class RoutingObjectStore : public ObjectStore {
 public:
  /// Either store may be null: its URIs then fail with FAILED_PRECONDITION naming the URI.
  RoutingObjectStore(std::unique_ptr<ObjectStore> file_store, std::unique_ptr<ObjectStore> s3_store);

  absl::Status PutFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::Status PutBytes(std::string_view uri, std::string_view bytes) override;
  absl::StatusOr<std::string> GetBytes(std::string_view uri) override;
  absl::Status GetFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::StatusOr<ObjectInfo> Head(std::string_view uri) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(std::string_view prefix_uri) override;
  absl::Status Delete(std::string_view uri) override;
  absl::StatusOr<std::filesystem::path> LocalPath(std::string_view uri) override;
  absl::StatusOr<std::shared_ptr<PinnedFolder>> PinFolder(std::string_view uri,
                                                          const std::filesystem::path& view_dir) override;

 private:
  absl::StatusOr<ObjectStore*> For(std::string_view uri) const;

  std::unique_ptr<ObjectStore> file_store_;
  std::unique_ptr<ObjectStore> s3_store_;
};

struct StorageOptions {
  /// Folders file:// URIs may name (model inputs, outputs); the data directory is usually one of them.
  std::vector<std::filesystem::path> file_roots;
  /// S3 settings; std::nullopt disables s3:// URIs.
  std::optional<S3Config> s3;
};

/// A RoutingObjectStore over a FileObjectStore(file_roots) and, when options.s3 is set, an S3ObjectStore.
std::shared_ptr<ObjectStore> MakeObjectStore(const StorageOptions& options);

}  // namespace quark::storage
