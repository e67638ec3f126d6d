#include "worker/storage/file_object_store.h"
#include "worker/storage/strings.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <cerrno>
#include <cstring>
#include <memory>
#include <system_error>

#include "worker/storage/object_uri.h"
#include "worker/storage/pinned_folder.h"

namespace quark::storage {
namespace fs = std::filesystem;
namespace {

fs::path TempPathBeside(const fs::path& target) {
  static std::atomic<uint64_t> counter{0};
  return target.parent_path() /
         str::Cat(".", target.filename().string(), ".tmp-", getpid(), "-", counter.fetch_add(1));
}

// Entries a model folder check looks at before giving up (a model has tens of files).
constexpr int kMaxCheckedEntries = 100000;

absl::Status HardLinkError(std::string_view uri, const fs::path& path, nlink_t links) {
  return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": ", path.string(), " is a hard link (",
                                              static_cast<int64_t>(links), " names); copy the file instead"));
}

// The descriptor's inode is a regular file with one name (a hard link's other name may lie outside the roots).
absl::Status CheckSingleName(std::string_view uri, const ConfinedHandle& handle) {
  struct stat info {};
  if (fstat(handle.fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) return absl::NotFoundError(str::Cat(uri, ": no such file"));
  if (info.st_nlink > 1) return HardLinkError(uri, handle.path, info.st_nlink);
  return absl::OkStatus();
}

// Writes through a temp name in the folder `dir` (a descriptor the confined walk opened) and renameat(2)s it to
// `name`: no name is looked up again after the walk, so a folder swapped for a symlink meanwhile is not followed.
absl::Status WriteInFolder(std::string_view uri, int dir, const std::string& name,
                           const std::function<absl::Status(int)>& write) {
  static std::atomic<uint64_t> counter{0};
  std::string temp = str::Cat(".", name, ".tmp-", getpid(), "-", counter.fetch_add(1));
  UniqueFd out(openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
  if (!out) return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": cannot create ", temp, ": ", std::strerror(errno)));
  absl::Status status = write(out.get());
  if (status.ok() && renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
    status = absl::InternalError(str::Cat("uri: ", uri, ": rename: ", std::strerror(errno)));
  }
  if (!status.ok()) unlinkat(dir, temp.c_str(), 0);
  return status;
}

absl::Status WriteAllFd(std::string_view uri, int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(str::Cat("uri: ", uri, ": write error: ", std::strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAll(std::string_view uri, int fd) {
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(str::Cat(uri, ": read error: ", std::strerror(errno)));
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<size_t>(n));
  }
}

absl::Status CopyFdTo(std::string_view uri, int fd, const fs::path& temp) {
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(str::Cat(uri, ": read error: ", std::strerror(errno)));
    if (n == 0) break;
    out.write(buffer, n);
  }
  out.close();
  if (!out) return absl::InternalError(str::Cat(temp.string(), ": write failed"));
  return absl::OkStatus();
}

bool IsTempName(const std::string& name) { return str::StartsWith(name, ".") && str::Contains(name, ".tmp-"); }

absl::Status WriteThroughTemp(const fs::path& path, const std::function<absl::Status(const fs::path&)>& write) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return absl::PermissionDeniedError(str::Cat(path.parent_path().string(), ": ", ec.message()));
  fs::path temp = TempPathBeside(path);
  absl::Status status = write(temp);
  if (status.ok()) {
    fs::rename(temp, path, ec);
    if (ec) status = absl::InternalError(str::Cat("rename to ", path.string(), ": ", ec.message()));
  }
  if (!status.ok()) fs::remove(temp, ec);
  return status;
}

}  // namespace

absl::Status WriteFileAtomically(const fs::path& path, std::string_view bytes) {
  return WriteThroughTemp(path, [&](const fs::path& temp) -> absl::Status {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) return absl::InternalError(str::Cat(temp.string(), ": write failed"));
    return absl::OkStatus();
  });
}

absl::Status CopyFileAtomically(const fs::path& from, const fs::path& to) {
  if (!fs::is_regular_file(from)) return absl::NotFoundError(str::Cat(from.string(), ": no such file"));
  return WriteThroughTemp(to, [&](const fs::path& temp) -> absl::Status {
    std::error_code ec;
    fs::copy_file(from, temp, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(str::Cat("copy ", from.string(), " to ", temp.string(), ": ", ec.message()));
    return absl::OkStatus();
  });
}

FileObjectStore::FileObjectStore(std::vector<fs::path> allowed_roots, Roots missing) {
  for (const fs::path& root : allowed_roots) {
    std::error_code ec;
    if (missing == Roots::kCreateMissing) fs::create_directories(root, ec);
    fs::path canonical = fs::weakly_canonical(fs::absolute(root), ec);
    if (!ec) roots_.push_back(canonical);
  }
}

absl::StatusOr<fs::path> FileObjectStore::ResolveConfined(std::string_view uri) const {
  absl::StatusOr<ObjectUri> parsed = ParseObjectUri(uri);
  if (!parsed.ok()) return parsed.status();
  if (parsed->scheme != ObjectUri::Scheme::kFile) {
    return absl::InvalidArgumentError(str::Cat("uri: ", uri, ": not a file:// URI"));
  }
  std::error_code ec;
  // Lexical normalisation removes "a/../" first; weakly_canonical then follows every symlink that exists.
  fs::path resolved = fs::weakly_canonical(fs::path(parsed->key).lexically_normal(), ec);
  if (ec) return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": cannot resolve: ", ec.message()));
  for (const fs::path& root : roots_) {
    if (IsInsideRoot(resolved, root)) return resolved;
  }
  std::vector<std::string> names;
  for (const fs::path& root : roots_) names.push_back(root.string());
  return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": resolves to ", resolved.string(),
                                                  ", outside the allowed roots [", str::Join(names, ", "), "]"));
}

absl::StatusOr<ConfinedHandle> FileObjectStore::OpenChecked(std::string_view uri, ConfinedOpenOptions options) const {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  // The resolution above gives the errors their usual wording; the walk is what is trusted: the names may have
  // changed since.
  return OpenConfined(roots_, uri, *path, options);
}

absl::Status FileObjectStore::WriteObject(std::string_view uri, const std::function<absl::Status(int)>& write) {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  if (!path->has_filename() || path->filename() == "..") {
    return absl::InvalidArgumentError(str::Cat("uri: ", uri, ": names no file"));
  }
  absl::StatusOr<ConfinedHandle> dir =
      OpenConfined(roots_, uri, path->parent_path(), {.as = OpenAs::kDirectory, .create_dirs = true});
  if (!dir.ok()) return dir.status();
  return WriteInFolder(uri, dir->fd.get(), path->filename().string(), write);
}

absl::Status FileObjectStore::PutFile(std::string_view uri, const fs::path& file) {
  UniqueFd in(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return absl::NotFoundError(str::Cat(file.string(), ": no such file"));
  return WriteObject(uri, [&](int out) -> absl::Status {
    char buffer[1 << 16];
    for (;;) {
      ssize_t n = read(in.get(), buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::InternalError(str::Cat(file.string(), ": read error: ", std::strerror(errno)));
      if (n == 0) return absl::OkStatus();
      if (absl::Status status = WriteAllFd(uri, out, std::string_view(buffer, n)); !status.ok()) return status;
    }
  });
}

absl::Status FileObjectStore::PutBytes(std::string_view uri, std::string_view bytes) {
  return WriteObject(uri, [&](int out) { return WriteAllFd(uri, out, bytes); });
}

absl::StatusOr<std::string> FileObjectStore::GetBytes(std::string_view uri) {
  absl::StatusOr<ConfinedHandle> handle = OpenChecked(uri, {.as = OpenAs::kFile});
  if (!handle.ok()) return handle.status();
  if (absl::Status status = CheckSingleName(uri, *handle); !status.ok()) return status;
  return ReadAll(uri, handle->fd.get());
}

absl::Status FileObjectStore::GetFile(std::string_view uri, const fs::path& file) {
  // The bytes come from the descriptor the confined walk opened, not from a second open of the name.
  absl::StatusOr<ConfinedHandle> handle = OpenChecked(uri, {.as = OpenAs::kFile});
  if (!handle.ok()) return handle.status();
  if (absl::Status status = CheckSingleName(uri, *handle); !status.ok()) return status;
  return WriteThroughTemp(file, [&](const fs::path& temp) { return CopyFdTo(uri, handle->fd.get(), temp); });
}

absl::StatusOr<std::shared_ptr<PinnedFolder>> FileObjectStore::PinFolder(std::string_view uri,
                                                                         const fs::path& view_dir) {
  absl::StatusOr<ConfinedHandle> handle = OpenChecked(uri, {.as = OpenAs::kDirectory});
  if (!handle.ok()) return handle.status();
  return PinnedFolder::Pin(roots_, uri, *std::move(handle), view_dir);
}

absl::StatusOr<fs::path> FileObjectStore::LocalPath(std::string_view uri) {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  if (absl::Status status = CheckLinks(uri, *path); !status.ok()) return status;
  return path;
}

bool FileObjectStore::InsideRoots(const fs::path& canonical) const {
  return std::any_of(roots_.begin(), roots_.end(), [&](const fs::path& root) { return IsInsideRoot(canonical, root); });
}

absl::Status FileObjectStore::CheckLinks(std::string_view uri, const fs::path& path) const {
  auto check_one = [&](const fs::path& entry) -> absl::Status {
    struct stat info {};
    if (lstat(entry.c_str(), &info) != 0) return absl::OkStatus();  // gone: the reader reports it missing
    if (S_ISLNK(info.st_mode)) {
      std::error_code ec;
      fs::path target = fs::weakly_canonical(entry, ec);
      if (ec || !InsideRoots(target)) {
        return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": ", entry.string(), " is a symlink to ",
                                                    target.string(), ", outside the allowed roots"));
      }
      if (stat(entry.c_str(), &info) != 0) return absl::OkStatus();
    }
    if (S_ISREG(info.st_mode) && info.st_nlink > 1) return HardLinkError(uri, entry, info.st_nlink);
    return absl::OkStatus();
  };
  if (absl::Status status = check_one(path); !status.ok()) return status;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return absl::OkStatus();
  // Symlinked folders are checked as entries (their target must lie inside the roots) but not descended into.
  int checked = 0;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (++checked > kMaxCheckedEntries) {
      return absl::PermissionDeniedError(
          str::Cat("uri: ", uri, ": more than ", kMaxCheckedEntries, " entries to check for links"));
    }
    if (absl::Status status = check_one(it->path()); !status.ok()) return status;
  }
  if (ec) return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": cannot check for links: ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<ObjectInfo> FileObjectStore::Head(std::string_view uri) {
  absl::StatusOr<ConfinedHandle> handle = OpenChecked(uri, {.as = OpenAs::kFile});
  if (!handle.ok()) return handle.status();
  struct stat info {};
  if (fstat(handle->fd.get(), &info) != 0) return absl::NotFoundError(str::Cat(uri, ": no such file"));
  return ObjectInfo{std::string(uri), static_cast<int64_t>(info.st_size), ""};
}

absl::StatusOr<std::vector<ObjectInfo>> FileObjectStore::List(std::string_view prefix_uri) {
  absl::StatusOr<fs::path> dir = ResolveConfined(prefix_uri);
  if (!dir.ok()) return dir.status();
  std::vector<ObjectInfo> out;
  std::error_code ec;
  if (!fs::is_directory(*dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(*dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file() || IsTempName(it->path().filename().string())) continue;
    std::string uri = str::Cat("file://", it->path().string());
    absl::StatusOr<fs::path> confined = ResolveConfined(uri);
    if (!confined.ok()) return confined.status();
    out.push_back(ObjectInfo{uri, static_cast<int64_t>(fs::file_size(*confined)), ""});
  }
  if (ec) return absl::InternalError(str::Cat(prefix_uri, ": listing failed: ", ec.message()));
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.uri < b.uri; });
  return out;
}

absl::Status FileObjectStore::Delete(std::string_view uri) {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  absl::StatusOr<ConfinedHandle> dir = OpenConfined(roots_, uri, path->parent_path(), {.as = OpenAs::kDirectory});
  if (dir.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  if (!dir.ok()) return dir.status();
  if (unlinkat(dir->fd.get(), path->filename().c_str(), 0) != 0 && errno != ENOENT) {
    return absl::InternalError(str::Cat(uri, ": delete failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace quark::storage
