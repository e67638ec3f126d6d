// A tenant's file:// model folder as quarkd itself reads it (ValidateConfig's module listing and estimate,
// SubmitJob's memory estimate): pinned inside the roots the caller may read, so a symlink inside the folder, or a
// folder swapped for one after the URI checks, cannot make quarkd read another tenant's files (issue #29 item 1).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/storage/pinned_folder.h"

namespace quark::server {

/// Not thread-safe to share; each call opens its own. The view (a private temp folder) is removed on destruction.
class ModelView {
 public:
  /// Walks `path` (absolute) with O_NOFOLLOW inside `roots` (absolute folders, canonicalized here) and pins every
  /// file below it (storage::PinnedFolder). NOT_FOUND when the folder is missing; PERMISSION_DENIED naming the
  /// entry for a symlink that leads out of `roots` or a hard-linked file.
  static absl::StatusOr<std::unique_ptr<ModelView>> Open(const std::vector<std::string>& roots, const std::string& path);
  ~ModelView();
  ModelView(const ModelView&) = delete;
  ModelView& operator=(const ModelView&) = delete;

  /// The folder to read by name instead of `path`.
  std::string path() const { return pinned_->view().string(); }

 private:
  ModelView(std::string base, std::shared_ptr<storage::PinnedFolder> pinned)
      : base_(std::move(base)), pinned_(std::move(pinned)) {}

  std::string base_;  // the temp folder holding the view
  std::shared_ptr<storage::PinnedFolder> pinned_;
};

/// The regular file at `path` (absolute) opened by the O_NOFOLLOW walk inside `roots` (as ModelView::Open), so a
/// data file swapped for a symlink into another tenant's folder after the URI checks is never read nor measured.
/// NOT_FOUND when missing; PERMISSION_DENIED naming the URI when it resolves outside `roots`.
absl::StatusOr<storage::UniqueFd> OpenConfinedFile(const std::vector<std::string>& roots, const std::string& path);

/// The size of that file (OpenConfinedFile, then fstat).
absl::StatusOr<int64_t> ConfinedFileSize(const std::vector<std::string>& roots, const std::string& path);

}  // namespace quark::server
