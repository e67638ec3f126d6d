#include "server/api/model_view.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "worker/storage/confined_open.h"

namespace quark::server {
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> CanonicalRoots(const std::vector<std::string>& roots) {
  std::vector<fs::path> canonical;
  for (const std::string& root : roots) {
    std::error_code error;
    fs::path resolved = fs::weakly_canonical(fs::absolute(root), error);
    if (!error) canonical.push_back(resolved);
  }
  return canonical;
}

}  // namespace

absl::StatusOr<storage::UniqueFd> OpenConfinedFile(const std::vector<std::string>& roots, const std::string& path) {
  absl::StatusOr<storage::ConfinedHandle> file = storage::OpenConfined(
      CanonicalRoots(roots), absl::StrCat("file://", path), path, {.as = storage::OpenAs::kFile});
  if (!file.ok()) return file.status();
  return std::move(file->fd);
}

absl::StatusOr<int64_t> ConfinedFileSize(const std::vector<std::string>& roots, const std::string& path) {
  absl::StatusOr<storage::UniqueFd> fd = OpenConfinedFile(roots, path);
  if (!fd.ok()) return fd.status();
  struct stat info {};
  if (fstat(fd->get(), &info) != 0) return absl::NotFoundError(absl::StrCat("file://", path, ": no such file"));
  return static_cast<int64_t>(info.st_size);
}

absl::StatusOr<std::unique_ptr<ModelView>> ModelView::Open(const std::vector<std::string>& roots,
                                                           const std::string& path) {
  const std::vector<fs::path> canonical = CanonicalRoots(roots);
  const std::string uri = absl::StrCat("file://", path);
  absl::StatusOr<storage::ConfinedHandle> folder =
      storage::OpenConfined(canonical, uri, path, {.as = storage::OpenAs::kDirectory});
  if (!folder.ok()) return folder.status();
  std::error_code error;
  std::string base = (fs::temp_directory_path(error) / "quarkd-model-XXXXXX").string();
  if (mkdtemp(base.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a temp folder for reading ", uri));
  }
  absl::StatusOr<std::shared_ptr<storage::PinnedFolder>> pinned =
      storage::PinnedFolder::Pin(canonical, uri, *std::move(folder), fs::path(base) / "model");
  if (!pinned.ok()) {
    fs::remove_all(base, error);
    return pinned.status();
  }
  return std::unique_ptr<ModelView>(new ModelView(base, *std::move(pinned)));
}

ModelView::~ModelView() {
  pinned_.reset();
  std::error_code error;
  fs::remove_all(base_, error);
}

}  // namespace quark::server
