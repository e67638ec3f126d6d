#include "worker/storage/pinned_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "worker/storage/strings.h"

namespace quark::storage {
namespace fs = std::filesystem;
namespace {

constexpr int kMaxDepth = 16;

// Names in one folder, read from a duplicate of its descriptor (readdir on the inode the walk opened).
absl::StatusOr<std::vector<std::string>> EntryNames(std::string_view uri, int dir) {
  int copy = dup(dir);
  DIR* stream = copy >= 0 ? fdopendir(copy) : nullptr;
  if (stream == nullptr) {
    if (copy >= 0) close(copy);
    return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": cannot list: ", std::strerror(errno)));
  }
  rewinddir(stream);
  std::vector<std::string> names;
  while (dirent* entry = readdir(stream)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  closedir(stream);
  return names;
}

}  // namespace

absl::StatusOr<std::shared_ptr<PinnedFolder>> PinnedFolder::Pin(const std::vector<fs::path>& roots,
                                                                std::string_view uri, ConfinedHandle folder,
                                                                const fs::path& view_dir) {
  std::error_code ec;
  fs::create_directories(view_dir.parent_path(), ec);
  if (mkdir(view_dir.c_str(), 0700) != 0) {
    return absl::InternalError(str::Cat(view_dir.string(), ": cannot create the model's view: ", std::strerror(errno)));
  }
  std::shared_ptr<PinnedFolder> pinned(new PinnedFolder(view_dir));
  absl::Status status = pinned->PinTree(roots, uri, folder.fd.get(), folder.path, fs::path(), 0);
  if (!status.ok()) return status;
  return pinned;
}

PinnedFolder::~PinnedFolder() {
  std::error_code ec;
  fs::remove_all(view_, ec);
}

absl::Status PinnedFolder::PinTree(const std::vector<fs::path>& roots, std::string_view uri, int dir,
                                   const fs::path& path, const fs::path& relative, int depth) {
  if (depth > kMaxDepth) {
    return absl::ResourceExhaustedError(str::Cat("uri: ", uri, ": folders nested deeper than ", kMaxDepth));
  }
  absl::StatusOr<std::vector<std::string>> names = EntryNames(uri, dir);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    if (++entries_ > kMaxEntries) {
      return absl::ResourceExhaustedError(str::Cat("uri: ", uri, ": more than ", kMaxEntries, " entries"));
    }
    UniqueFd fd(openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    const int open_error = errno;
    ConfinedHandle entry{std::move(fd), path / name};
    if (!entry.fd && open_error == ELOOP) {
      // A symlink: walk its target like any path a caller names; it must end inside the roots.
      char target[PATH_MAX];
      ssize_t n = readlinkat(dir, name.c_str(), target, sizeof(target) - 1);
      if (n < 0) return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": ", (path / name).string(), " changed while read"));
      fs::path resolved = path / std::string(target, static_cast<size_t>(n));
      absl::StatusOr<ConfinedHandle> linked = OpenConfined(roots, uri, resolved, {.as = OpenAs::kAny});
      if (!linked.ok()) {
        return absl::Status(linked.status().code(), str::Cat("uri: ", uri, ": ", (relative / name).string(),
                                                             " is a symlink: ", linked.status().message()));
      }
      entry = *std::move(linked);
    } else if (!entry.fd) {
      if (open_error == EMFILE || open_error == ENFILE) {
        return absl::ResourceExhaustedError(str::Cat("uri: ", uri, ": too many files to hold open"));
      }
      continue;  // a socket, fifo or entry removed meanwhile: nothing an engine reads
    }
    if (absl::Status status = PinEntry(roots, uri, std::move(entry), relative / name, depth); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status PinnedFolder::PinEntry(const std::vector<fs::path>& roots, std::string_view uri, ConfinedHandle entry,
                                    const fs::path& relative, int depth) {
  struct stat info {};
  if (fstat(entry.fd.get(), &info) != 0) return absl::OkStatus();
  fs::path shown = view_ / relative;
  if (S_ISDIR(info.st_mode)) {
    if (mkdir(shown.c_str(), 0700) != 0) {
      return absl::InternalError(str::Cat(shown.string(), ": cannot create: ", std::strerror(errno)));
    }
    return PinTree(roots, uri, entry.fd.get(), entry.path, relative, depth + 1);
  }
  if (!S_ISREG(info.st_mode)) return absl::OkStatus();
  if (info.st_nlink > 1) {
    return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": ", entry.path.string(), " is a hard link (",
                                                static_cast<int64_t>(info.st_nlink), " names); copy the file instead"));
  }
  std::string magic = str::Cat("/proc/self/fd/", entry.fd.get());
  if (symlink(magic.c_str(), shown.c_str()) != 0) {
    return absl::InternalError(str::Cat(shown.string(), ": cannot create: ", std::strerror(errno)));
  }
  files_.push_back(std::move(entry.fd));
  return absl::OkStatus();
}

}  // namespace quark::storage
