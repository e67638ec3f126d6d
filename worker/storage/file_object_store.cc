#include "worker/storage/file_object_store.h"
#include "worker/storage/strings.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
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
  if (!fs::is_regular_file(*path)) return absl::NotFoundError(str::Cat(uri, ": no such file"));
  std::ifstream in(*path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::InternalError(str::Cat(uri, ": read error"));
  return bytes;
}

absl::Status FileObjectStore::GetFile(std::string_view uri, const fs::path& file) {
  absl::StatusOr<fs::path> path = ResolveConfined(uri);
  if (!path.ok()) return path.status();
  if (!fs::is_regular_file(*path)) return absl::NotFoundError(str::Cat(uri, ": no such file"));
  return CopyFileAtomically(*path, file);
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
