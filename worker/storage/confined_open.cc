#include "worker/storage/confined_open.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>

#include "worker/storage/strings.h"

namespace quark::storage {
namespace fs = std::filesystem;
namespace {

constexpr int kMaxLinks = 40;  // the kernel's own limit on links in one path

void PushFront(std::deque<std::string>& pending, const fs::path& target) {
  std::vector<std::string> parts;
  for (const fs::path& part : target.relative_path()) parts.push_back(part.string());
  pending.insert(pending.begin(), parts.begin(), parts.end());
}

fs::path Joined(const std::vector<std::string>& names) {
  fs::path out = "/";
  for (const std::string& name : names) out /= name;
  return out;
}

bool InsideAny(const std::vector<fs::path>& roots, const fs::path& path) {
  return std::any_of(roots.begin(), roots.end(), [&](const fs::path& root) { return IsInsideRoot(path, root); });
}

absl::Status OutsideRoots(std::string_view uri, const fs::path& path, const std::vector<fs::path>& roots) {
  std::vector<std::string> names;
  for (const fs::path& root : roots) names.push_back(root.string());
  return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": resolves to ", path.string(),
                                              ", outside the allowed roots [", str::Join(names, ", "), "]"));
}

absl::Status Missing(std::string_view uri, OpenAs as) {
  return absl::NotFoundError(str::Cat(uri, as == OpenAs::kDirectory ? ": no such directory" : ": no such file"));
}

absl::StatusOr<std::string> ReadLink(std::string_view uri, int link_fd) {
  char buffer[PATH_MAX];
  ssize_t n = readlinkat(link_fd, "", buffer, sizeof(buffer));
  if (n < 0 || n >= static_cast<ssize_t>(sizeof(buffer))) {
    return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": cannot read a symlink on its path"));
  }
  return std::string(buffer, static_cast<size_t>(n));
}

int FinalFlags(OpenAs as) {
  int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  if (as == OpenAs::kDirectory) flags |= O_DIRECTORY;
  return flags;
}

// Opens the last component for I/O and checks it is the inode the walk reached (its O_PATH descriptor).
absl::StatusOr<UniqueFd> Reopen(std::string_view uri, int parent, const std::string& name, int reached, OpenAs as) {
  UniqueFd fd(name.empty() ? open("/", FinalFlags(as)) : openat(parent, name.c_str(), FinalFlags(as)));
  struct stat want {}, got {};
  if (!fd || fstat(fd.get(), &got) != 0 || fstat(reached, &want) != 0 || got.st_dev != want.st_dev ||
      got.st_ino != want.st_ino) {
    return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": changed while it was being opened"));
  }
  if (as == OpenAs::kFile && !S_ISREG(got.st_mode)) return Missing(uri, as);
  if (as == OpenAs::kAny && !S_ISREG(got.st_mode) && !S_ISDIR(got.st_mode)) return Missing(uri, as);
  return fd;
}

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

bool IsInsideRoot(const fs::path& path, const fs::path& root) {
  auto [root_end, path_it] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return root_end == root.end();
}

absl::StatusOr<ConfinedHandle> OpenConfined(const std::vector<fs::path>& roots, std::string_view uri,
                                            const fs::path& path, ConfinedOpenOptions options) {
  if (!path.is_absolute()) return absl::InvalidArgumentError(str::Cat("uri: ", uri, ": not an absolute path"));
  const bool create = options.create_dirs && options.as == OpenAs::kDirectory;
  std::deque<std::string> pending;
  PushFront(pending, path);
  std::vector<UniqueFd> opened;  // opened[i] is the folder (or, last, the object) names[0..i] reached
  std::vector<std::string> names;
  UniqueFd top(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  int links = 0;
  while (!pending.empty()) {
    std::string name = std::move(pending.front());
    pending.pop_front();
    if (name.empty() || name == ".") continue;
    if (name == "..") {
      if (!names.empty()) {
        names.pop_back();
        opened.pop_back();
      }
      continue;
    }
    int parent = opened.empty() ? top.get() : opened.back().get();
    UniqueFd next(openat(parent, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!next && errno == ENOENT && create) {
      names.push_back(name);
      bool inside = InsideAny(roots, Joined(names));
      names.pop_back();
      if (!inside) return Missing(uri, options.as);
      if (mkdirat(parent, name.c_str(), 0777) != 0 && errno != EEXIST) {
        return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": cannot create folder ", name, ": ",
                                                    std::strerror(errno)));
      }
      next = UniqueFd(openat(parent, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    }
    if (!next) return Missing(uri, options.as);
    struct stat info {};
    if (fstat(next.get(), &info) != 0) return Missing(uri, options.as);
    if (S_ISLNK(info.st_mode)) {
      if (++links > kMaxLinks) return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": too many symlinks"));
      absl::StatusOr<std::string> target = ReadLink(uri, next.get());
      if (!target.ok()) return target.status();
      if (!target->empty() && (*target)[0] == '/') {
        names.clear();
        opened.clear();
      }
      PushFront(pending, fs::path(*target));
      continue;
    }
    if (!pending.empty() && !S_ISDIR(info.st_mode)) return Missing(uri, options.as);
    names.push_back(name);
    opened.push_back(std::move(next));
  }
  fs::path reached = Joined(names);
  if (!InsideAny(roots, reached)) return OutsideRoots(uri, reached, roots);
  int parent = opened.size() >= 2 ? opened[opened.size() - 2].get() : top.get();
  int last = opened.empty() ? top.get() : opened.back().get();
  absl::StatusOr<UniqueFd> fd = Reopen(uri, parent, names.empty() ? "" : names.back(), last, options.as);
  if (!fd.ok()) return fd.status();
  return ConfinedHandle{*std::move(fd), reached};
}

}  // namespace quark::storage
