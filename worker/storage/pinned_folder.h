// A model folder read in place without a time-of-check-to-time-of-use window: every file is opened once, after
// the checks, and the engine reads those descriptors by name.
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/storage/confined_open.h"

namespace quark::storage {

/// Holds every regular file below a folder open, each reached by OpenConfined's walk (a symlink inside the folder
/// is walked the same way and must end inside the roots; a hard-linked file is refused), and shows them as a
/// private tree of names: `view()` is a folder (mode 0700) with the folder's subfolders and, for each file, a
/// symlink to /proc/self/fd/N of its descriptor. Opening a name in the view reopens the inode that passed the
/// checks (a magic link is not a path lookup), so renaming, replacing or symlinking anything in the tenant's
/// folder afterwards changes nothing the job reads. The view works in this process only; it is removed and the
/// descriptors closed on destruction. Thread-safe (const after Pin).
class PinnedFolder {
 public:
  /// `folder` is the folder's descriptor and path from OpenConfined (OpenAs::kDirectory); `view_dir` must not
  /// exist yet (its parent is created). PERMISSION_DENIED naming `uri` and the entry for a hard link or a symlink
  /// out of `roots`; RESOURCE_EXHAUSTED past kMaxEntries entries or 16 nested folders.
  static absl::StatusOr<std::shared_ptr<PinnedFolder>> Pin(const std::vector<std::filesystem::path>& roots,
                                                           std::string_view uri, ConfinedHandle folder,
                                                           const std::filesystem::path& view_dir);
  ~PinnedFolder();
  PinnedFolder(const PinnedFolder&) = delete;
  PinnedFolder& operator=(const PinnedFolder&) = delete;

  /// The folder the engine reads; the same relative names as the pinned folder.
  const std::filesystem::path& view() const { return view_; }
  /// Files held open.
  size_t file_count() const { return files_.size(); }

  static constexpr int kMaxEntries = 4096;

 private:
  explicit PinnedFolder(std::filesystem::path view) : view_(std::move(view)) {}
  absl::Status PinTree(const std::vector<std::filesystem::path>& roots, std::string_view uri, int dir,
                       const std::filesystem::path& path, const std::filesystem::path& relative, int depth);
  absl::Status PinEntry(const std::vector<std::filesystem::path>& roots, std::string_view uri, ConfinedHandle entry,
                        const std::filesystem::path& relative, int depth);

  std::filesystem::path view_;
  std::vector<UniqueFd> files_;
  int entries_ = 0;
};

}  // namespace quark::storage
