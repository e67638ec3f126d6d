#include "worker/storage/file_object_store.h"
#include "worker/storage/strings.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <cerrno>
#include <cstring>
#include <memory>
#include <system_error>

#include "worker/storage/object_uri.h"

namespace quark::storage {
namespace fs = std::filesystem;
namespace {

bool IsInside(const fs::path& path, const fs::path& root) {
  auto [root_end, path_it] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return root_end == root.end();
}

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

// An open file descriptor, closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens the resolved `path` for reading without following a symlink swapped in since it was resolved, and
// checks the inode actually opened: a regular file with one name. NOT_FOUND when absent or not a file.
absl::StatusOr<std::unique_ptr<Fd>> OpenForRead(std::string_view uri, const fs::path& path) {
  auto fd = std::make_unique<Fd>(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd->get() < 0) {
    if (errno == ELOOP) return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": ", path.string(), " became a symlink"));
    return absl::NotFoundError(str::Cat(uri, ": no such file"));
  }
  struct stat info {};
  if (fstat(fd->get(), &info) != 0 || !S_ISREG(info.st_mode)) return absl::NotFoundError(str::Cat(uri, ": no such file"));
  if (info.st_nlink > 1) return HardLinkError(uri, path, info.st_nlink);
  return fd;
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

FileObjectStore::FileObjectStore(std::vector<fs::path> allowed_roots) {
  for (const fs::path& root : allowed_roots) {
    std::error_code ec;
    fs::create_directories(root, ec);
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
    if (IsInside(resolved, root)) return resolved;
  }
  std::vector<std::string> names;
  for (const fs::path& root : roots_) names.push_back(root.string());
  return absl::PermissionDeniedError(str::Cat("uri: ", uri, ": resolves to ", resolved.string(),
                                                  ", outside the allowed roots [", str::Join(names, ", "), "]"));
}

absl::Status FileObjectStore::PutFile(std::string_view uri, const fs::path& file) {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  return CopyFileAtomically(file, *path);
}

absl::Status FileObjectStore::PutBytes(std::string_view uri, std::string_view bytes) {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  return WriteFileAtomically(*path, bytes);
}

absl::StatusOr<std::string> FileObjectStore::GetBytes(std::string_view uri) {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  absl::StatusOr<std::unique_ptr<Fd>> fd = OpenForRead(uri, *path);
  if (!fd.ok()) return fd.status();
  return ReadAll(uri, (*fd)->get());
}

absl::Status FileObjectStore::GetFile(std::string_view uri, const fs::path& file) {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  // The bytes come from the descriptor that passed the checks, not from a second open of the name.
  absl::StatusOr<std::unique_ptr<Fd>> fd = OpenForRead(uri, *path);
  if (!fd.ok()) return fd.status();
  return WriteThroughTemp(file, [&](const fs::path& temp) { return CopyFdTo(uri, (*fd)->get(), temp); });
}

absl::StatusOr<fs::path> FileObjectStore::LocalPath(std::string_view uri) {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  if (absl::Status status = CheckLinks(uri, *path); !status.ok()) return status;
  return path;
}

bool FileObjectStore::InsideRoots(const fs::path& canonical) const {
  return std::any_of(roots_.begin(), roots_.end(), [&](const fs::path& root) { return IsInside(canonical, root); });
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
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  std::error_code ec;
  if (!fs::is_regular_file(*path, ec)) return absl::NotFoundError(str::Cat(uri, ": no such file"));
  return ObjectInfo{std::string(uri), static_cast<int64_t>(fs::file_size(*path, ec)), ""};
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
  std::error_code ec;
  fs::remove(*path, ec);
  if (ec) return absl::InternalError(str::Cat(uri, ": delete failed: ", ec.message()));
  return absl::OkStatus();
}

}  // namespace quark::storage
