// file:// objects on the local disk, confined to a set of allowed root folders.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "worker/storage/confined_open.h"
#include "worker/storage/object_store.h"

namespace quark::storage {

/// Every path is checked before use: after resolving "..", "." and symlinks (of every existing ancestor), it must
/// lie inside one of the allowed roots, else PERMISSION_DENIED naming the URI and the roots. Writes go to a temp
/// file beside the target and are renamed into place, so readers see the old or the new object, never a part.
/// Every open walks the path one component at a time with O_NOFOLLOW (OpenConfined), so a folder swapped for a
/// symlink after the check is never followed out of the roots; writes go through renameat(2) in the folder that
/// walk opened. Reads re-check links at read time (quarkd checked them at submit, but the folder may change since): a
/// hard-linked file (st_nlink > 1: the same inode may also be named outside the roots) or, inside a model folder,
/// a symlink leading out of the roots is PERMISSION_DENIED naming the URI and the entry.
class FileObjectStore : public ObjectStore {
 public:
  /// Whether the constructor creates missing roots (the worker's own) or leaves them (a tenant's, made on the
  /// first write below them, through the confined walk).
  enum class Roots { kCreateMissing, kKeepMissing };
  /// `allowed_roots` are absolute folders; an empty list allows nothing.
  explicit FileObjectStore(std::vector<std::filesystem::path> allowed_roots, Roots missing = Roots::kCreateMissing);

  absl::Status PutFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::Status PutBytes(std::string_view uri, std::string_view bytes) override;
  absl::StatusOr<std::string> GetBytes(std::string_view uri) override;
  absl::Status GetFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::StatusOr<ObjectInfo> Head(std::string_view uri) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(std::string_view prefix_uri) override;
  absl::Status Delete(std::string_view uri) override;

  /// The local path of `uri` after the confinement check (for callers that read a model folder in place), and,
  /// when it exists, the link check of it and of everything below it.
  absl::StatusOr<std::filesystem::path> LocalPath(std::string_view uri) override;
  absl::StatusOr<std::filesystem::path> ResolveConfined(std::string_view uri) const;
  /// The folder at `uri`, every file below it held open after the walk's checks (see PinnedFolder).
  absl::StatusOr<std::shared_ptr<PinnedFolder>> PinFolder(std::string_view uri,
                                                          const std::filesystem::path& view_dir) override;

 private:
  /// PERMISSION_DENIED when `path` (resolved) is a hard-linked file or, for a folder, when anything below it is
  /// a hard-linked file or a symlink out of the roots.
  absl::Status CheckLinks(std::string_view uri, const std::filesystem::path& path) const;
  bool InsideRoots(const std::filesystem::path& canonical) const;
  /// ResolveConfined, then OpenConfined of the result: the descriptor every read uses.
  absl::StatusOr<ConfinedHandle> OpenChecked(std::string_view uri, ConfinedOpenOptions options) const;
  /// Creates the object's folder through the confined walk and writes through a temp name in it.
  absl::Status WriteObject(std::string_view uri, const std::function<absl::Status(int)>& write);

  std::vector<std::filesystem::path> roots_;  // canonical
};

/// Writes `bytes` to `path` through a temp file in the same folder and rename(2); creates parent folders.
absl::Status WriteFileAtomically(const std::filesystem::path& path, std::string_view bytes);

/// Copies `from` to `to` through a temp file in `to`'s folder and rename(2); creates parent folders.
absl::Status CopyFileAtomically(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace quark::storage
