#include "worker/storage/model_cache.h"
#include "worker/storage/strings.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "core/base/digest.h"
#include "worker/storage/object_uri.h"

namespace quark::storage {
namespace fs = std::filesystem;
namespace {

constexpr char kDoneSuffix[] = ".done";

// Holds flock(LOCK_EX) on a file for its lifetime.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) : fd_(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

int64_t FolderBytes(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) total += static_cast<int64_t>(it->file_size(ec));
  }
  return total;
}

std::string TrimSlashes(std::string_view uri) {
  while (!uri.empty() && uri.back() == '/') uri.remove_suffix(1);
  return std::string(uri);
}

}  // namespace

ModelCache::ModelCache(std::shared_ptr<ObjectStore> store, fs::path dir, int64_t max_bytes)
    : store_(std::move(store)), dir_(std::move(dir)), max_bytes_(max_bytes) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
}

absl::StatusOr<fs::path> ModelCache::Fetch(std::string_view uri, const FetchProgress& progress,
                                           const std::function<bool()>& cancelled) {
  return Fetch(*store_, "", uri, progress, cancelled);
}

absl::StatusOr<fs::path> ModelCache::Fetch(ObjectStore& store, std::string_view scope, std::string_view uri,
                                           const FetchProgress& progress, const std::function<bool()>& cancelled) {
  absl::StatusOr<ObjectUri> parsed = ParseObjectUri(uri);
  if (!parsed.ok()) return absl::InvalidArgumentError(str::Cat("model_uri: ", parsed.status().message()));
  if (parsed->scheme == ObjectUri::Scheme::kFile) {
    absl::StatusOr<fs::path> local = store.LocalPath(uri);
    if (!local.ok()) return absl::Status(local.status().code(), str::Cat("model_uri: ", local.status().message()));
    std::error_code ec;
    if (!fs::is_directory(*local, ec)) return absl::NotFoundError(str::Cat("model_uri: ", uri, ": no such directory"));
    return *local;
  }
  std::string key = TrimSlashes(uri);
  // The scope goes into the entry's name only, never into a file: it holds an access key id.
  fs::path entry = dir_ / Sha256Hex(scope.empty() ? key : str::Cat(scope, "\n", key)).substr(0, 24);
  std::lock_guard<std::mutex> lock(mu_);
  FileLock file_lock(dir_ / ".lock");
  fs::path done = fs::path(entry.string() + kDoneSuffix);
  std::error_code ec;
  if (fs::exists(done, ec) && fs::is_directory(entry, ec)) {
    fs::last_write_time(done, fs::file_time_type::clock::now(), ec);
    return entry;
  }
  return Download(store, key, entry, progress, cancelled);
}

absl::StatusOr<LocalModel> ModelCache::FetchPinned(ObjectStore& store, std::string_view scope, std::string_view uri,
                                                   const fs::path& view_dir, const FetchProgress& progress,
                                                   const std::function<bool()>& cancelled) {
  absl::StatusOr<ObjectUri> parsed = ParseObjectUri(uri);
  if (!parsed.ok()) return absl::InvalidArgumentError(str::Cat("model_uri: ", parsed.status().message()));
  if (parsed->scheme != ObjectUri::Scheme::kFile) {
    absl::StatusOr<fs::path> dir = Fetch(store, scope, uri, progress, cancelled);
    if (!dir.ok()) return dir.status();
    return LocalModel{*dir, nullptr};
  }
  absl::StatusOr<std::shared_ptr<PinnedFolder>> pinned = store.PinFolder(uri, view_dir);
  if (pinned.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(str::Cat("model_uri: ", uri, ": no such directory"));
  }
  if (!pinned.ok()) return absl::Status(pinned.status().code(), str::Cat("model_uri: ", pinned.status().message()));
  return LocalModel{(*pinned)->view(), *pinned};
}

absl::StatusOr<fs::path> ModelCache::Download(ObjectStore& store, std::string_view uri, const fs::path& entry,
                                              const FetchProgress& progress, const std::function<bool()>& cancelled) {
  absl::StatusOr<std::vector<ObjectInfo>> objects = store.List(uri);
  if (!objects.ok()) return absl::Status(objects.status().code(), str::Cat("model_uri: ", objects.status().message()));
  if (objects->empty()) return absl::NotFoundError(str::Cat("model_uri: ", uri, ": no objects under this prefix"));
  int64_t total = 0;
  for (const ObjectInfo& object : *objects) total += object.size_bytes;
  if (total > max_bytes_) {
    return absl::ResourceExhaustedError(str::Cat("model_uri: ", uri, ": ", total,
                                                     " bytes exceed the model cache bound of ", max_bytes_, " bytes"));
  }
  if (absl::Status status = EvictFor(total, entry); !status.ok()) return status;
  std::error_code ec;
  fs::path partial = fs::path(entry.string() + ".partial");
  fs::remove_all(partial, ec);
  fs::remove_all(entry, ec);
  int64_t done_bytes = 0;
  std::string base = str::Cat(uri, "/");
  for (const ObjectInfo& object : *objects) {
    if (cancelled && cancelled()) {
      fs::remove_all(partial, ec);
      return absl::CancelledError(str::Cat("download of ", uri, " cancelled"));
    }
    std::string relative = object.uri.substr(base.size());
    fs::path target = (partial / relative).lexically_normal();
    if (relative.empty() || !str::StartsWith(target.string(), partial.string() + "/")) {
      fs::remove_all(partial, ec);
      return absl::InvalidArgumentError(str::Cat("model_uri: object ", object.uri, " escapes its folder"));
    }
    if (absl::Status status = store.GetFile(object.uri, target); !status.ok()) {
      fs::remove_all(partial, ec);
      return absl::Status(status.code(), str::Cat("model_uri: ", status.message()));
    }
    done_bytes += object.size_bytes;
    if (progress) progress(done_bytes, total);
  }
  fs::rename(partial, entry, ec);
  if (ec) return absl::InternalError(str::Cat("rename to ", entry.string(), ": ", ec.message()));
  std::ofstream(entry.string() + kDoneSuffix) << uri << "\n";
  return entry;
}

absl::Status ModelCache::EvictFor(int64_t needed, const fs::path& keep) {
  struct Entry {
    fs::path dir;
    fs::file_time_type used;
    int64_t bytes;
  };
  std::vector<Entry> entries;
  int64_t used = 0;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir_, ec)) {
    std::string name = item.path().string();
    if (!str::EndsWith(name, kDoneSuffix)) continue;
    fs::path dir = name.substr(0, name.size() - std::string_view(kDoneSuffix).size());
    if (dir == keep) continue;
    Entry entry{dir, fs::last_write_time(item.path(), ec), FolderBytes(dir)};
    used += entry.bytes;
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& entry : entries) {
    if (used + needed <= max_bytes_) break;
    fs::remove(fs::path(entry.dir.string() + kDoneSuffix), ec);
    fs::remove_all(entry.dir, ec);
    used -= entry.bytes;
  }
  return absl::OkStatus();
}

int64_t ModelCache::UsedBytes() const {
  int64_t used = 0;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir_, ec)) {
    std::string name = item.path().string();
    if (str::EndsWith(name, kDoneSuffix)) used += FolderBytes(name.substr(0, name.size() - 5));
  }
  return used;
}

}  // namespace quark::storage
