// file:// objects on the local disk, confined to a set of allowed root folders.
#pragma once

#include <filesystem>
#include <vector>

#include "worker/storage/object_store.h"

namespace quark::storage {

/// Every path is checked before use: after resolving "..", "." and symlinks (of every existing ancestor), it must
/// lie inside one of the allowed roots, else PERMISSION_DENIED naming the URI and the roots. Writes go to a temp
/// file beside the target and are renamed into place, so readers see the old or the new object, never a part.
class FileObjectStore : public ObjectStore {
 public:
  /// `allowed_roots` are absolute folders (created if missing); an empty list allows nothing.
  explicit FileObjectStore(std::vector<std::filesystem::path> allowed_roots);

  absl::Status PutFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::Status PutBytes(std::string_view uri, std::string_view bytes) override;
  absl::StatusOr<std::string> GetBytes(std::string_view uri) override;
  absl::Status GetFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::StatusOr<ObjectInfo> Head(std::string_view uri) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(std::string_view prefix_uri) override;
  absl::Status Delete(std::string_view uri) override;

  /// The local path of `uri` after the confinement check (for callers that read a model folder in place).
  absl::StatusOr<std::filesystem::path> LocalPath(std::string_view uri) override { return ResolveConfined(uri); }
  absl::StatusOr<std::filesystem::path> ResolveConfined(std::string_view uri) const;

 private:
  std::vector<std::filesystem::path> roots_;  // canonical
};

/// Writes `bytes` to `path` through a temp file in the same folder and rename(2); creates parent folders.
absl::Status WriteFileAtomically(const std::filesystem::path& path, std::string_view bytes);

/// Copies `from` to `to` through a temp file in `to`'s folder and rename(2); creates parent folders.
absl::Status CopyFileAtomically(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace quark::storage
