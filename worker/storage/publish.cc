#include "worker/storage/publish.h"
#include "worker/storage/strings.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "core/base/digest.h"
#include "worker/storage/manifest_signature.h"
#include "worker/storage/object_uri.h"

namespace quark::storage {
namespace fs = std::filesystem;
namespace {

constexpr char kManifestName[] = "manifest.json";

std::string NowRfc3339() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

absl::StatusOr<std::vector<PublishedFile>> ScanDir(const fs::path& dir, std::string_view prefix) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return absl::NotFoundError(str::Cat(dir.string(), ": no such directory"));
  std::vector<PublishedFile> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    PublishedFile file;
    file.path = it->path().lexically_relative(dir).generic_string();
    if (file.path == kManifestName) {
      return absl::InvalidArgumentError(
          str::Cat(it->path().string(), ": the artifact folder may not contain its own ", kManifestName));
    }
    file.uri = JoinUri(prefix, file.path);
    file.size_bytes = static_cast<int64_t>(it->file_size());
    absl::StatusOr<std::string> sha = Sha256FileHex(it->path());
    if (!sha.ok()) return sha.status();
    file.sha256 = *sha;
    files.push_back(std::move(file));
  }
  if (ec) return absl::InternalError(str::Cat(dir.string(), ": listing failed: ", ec.message()));
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

}  // namespace

nlohmann::json BuildManifest(const std::vector<PublishedFile>& files, const ManifestInfo& manifest) {
  nlohmann::json doc = manifest.extra.is_object() ? manifest.extra : nlohmann::json::object();
  doc["format_version"] = 1;
  doc["job_id"] = manifest.job_id;
  doc["created_at"] = NowRfc3339();
  nlohmann::json list = nlohmann::json::array();
  for (const PublishedFile& file : files) {
    list.push_back({{"path", file.path}, {"size_bytes", file.size_bytes}, {"sha256", file.sha256}});
  }
  doc["files"] = std::move(list);
  if (!manifest.config.is_null()) doc["config"] = manifest.config;
  doc["metrics"] = nlohmann::json::object();
  for (const auto& [name, value] : manifest.metrics) doc["metrics"][name] = value;
  return doc;
}

absl::StatusOr<PublishResult> PublishArtifacts(ObjectStore& store, const fs::path& dir,
                                               std::string_view output_prefix, const ManifestInfo& manifest,
                                               const PublishProgress& progress,
                                               const std::function<bool()>& cancelled) {
  absl::StatusOr<std::vector<PublishedFile>> files = ScanDir(dir, output_prefix);
  if (!files.ok()) return files.status();
  PublishResult result;
  result.manifest_uri = JoinUri(output_prefix, kManifestName);
  if (absl::Status status = store.Delete(result.manifest_uri); !status.ok()) return status;

  int64_t bytes_total = 0;
  int64_t bytes_done = 0;
  for (const PublishedFile& file : *files) bytes_total += file.size_bytes;
  for (size_t i = 0; i < files->size(); ++i) {
    const PublishedFile& file = (*files)[i];
    if (cancelled && cancelled()) return absl::CancelledError("publish cancelled before " + file.uri);
    if (absl::Status status = store.PutFile(file.uri, dir / file.path); !status.ok()) {
      return absl::Status(status.code(), str::Cat("upload of ", file.path, " failed: ", status.message()));
    }
    absl::StatusOr<ObjectInfo> info = store.Head(file.uri);
    if (!info.ok()) return info.status();
    if (info->size_bytes != file.size_bytes) {
      return absl::DataLossError(str::Cat(file.uri, ": stored size ", info->size_bytes, " bytes, local file has ",
                                              file.size_bytes));
    }
    bytes_done += file.size_bytes;
    if (progress) progress(static_cast<int>(i + 1), static_cast<int>(files->size()), bytes_done, bytes_total);
  }
  nlohmann::json doc = BuildManifest(*files, manifest);
  if (manifest.signer != nullptr) SignManifest(doc, *manifest.signer);
  const std::string manifest_bytes = doc.dump(2);
  if (absl::Status status = store.PutBytes(result.manifest_uri, manifest_bytes); !status.ok()) return status;
  result.manifest_sha256 = Sha256Hex(manifest_bytes);
  result.files = std::move(*files);
  return result;
}

std::string AttemptOutputPrefix(std::string_view output_uri, std::string_view job_id, int attempt) {
  return JoinUri(JoinUri(output_uri, job_id), str::Cat("attempt-", attempt));
}

std::string SweepManifestUri(std::string_view output_uri, std::string_view job_id) {
  return JoinUri(JoinUri(output_uri, job_id), kManifestName);
}

absl::Status RemovePublished(ObjectStore& store, std::string_view prefix) {
  absl::Status first = store.Delete(JoinUri(prefix, kManifestName));
  absl::StatusOr<std::vector<ObjectInfo>> objects = store.List(prefix);
  if (!objects.ok()) return first.ok() ? objects.status() : first;
  for (const ObjectInfo& object : *objects) {
    absl::Status status = store.Delete(object.uri);
    if (first.ok() && !status.ok()) first = status;
  }
  return first;
}

}  // namespace quark::storage
