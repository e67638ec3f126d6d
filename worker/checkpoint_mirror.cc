#include "worker/checkpoint_mirror.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>
#include <vector>

#include "core/base/digest.h"
#include "worker/storage/object_uri.h"
#include "worker/storage/strings.h"

namespace quark::worker {
namespace fs = std::filesystem;
namespace {

std::string Numbered(const char* format, int64_t index) {
  char name[64];
  std::snprintf(name, sizeof(name), format, static_cast<long long>(index));
  return name;
}
std::string LayerName(int64_t index) { return Numbered("layer-%05lld", index); }
std::string MarkerName(int64_t index) { return Numbered("commit-%05lld.json", index); }

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The local checkpoint's state.json ({"fingerprint", "finished_layers"}); null when missing or unreadable.
nlohmann::json LocalState(const fs::path& dir) {
  const nlohmann::json state = nlohmann::json::parse(ReadText(dir / "state.json"), nullptr, false);
  if (!state.is_object() || !state.contains("fingerprint") || !state["fingerprint"].is_string() ||
      !state.contains("finished_layers") || !state["finished_layers"].is_number_integer()) {
    return nullptr;
  }
  return state;
}

// The files of local layer `index`, relative to the checkpoint folder, '/'-separated.
std::vector<std::string> LayerFiles(const fs::path& dir, int64_t index) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(dir / LayerName(index), ec)) {
    if (entry.is_regular_file(ec)) files.push_back(fs::relative(entry.path(), dir, ec).generic_string());
  }
  files.push_back(LayerName(index) + ".json");
  return files;
}

// The marker's shape: {"layer": index, "fingerprint": "...", "written_unix_s": N, "objects": {path: {size, sha256}}}.
std::string SecondsSince(std::chrono::steady_clock::time_point start) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return text;
}

bool ValidMarker(const nlohmann::json& marker, int64_t index) {
  if (!marker.is_object() || !marker.contains("layer") || marker["layer"] != index) return false;
  if (!marker.contains("fingerprint") || !marker["fingerprint"].is_string()) return false;
  if (!marker.contains("written_unix_s") || !marker["written_unix_s"].is_number_integer()) return false;
  if (!marker.contains("objects") || !marker["objects"].is_object() || marker["objects"].empty()) return false;
  for (const auto& [path, object] : marker["objects"].items()) {
    if (path.empty() || path.find("..") != std::string::npos || path[0] == '/') return false;
    if (!object.is_object() || !object.contains("size") || !object["size"].is_number_integer()) return false;
    if (!object.contains("sha256") || !object["sha256"].is_string()) return false;
  }
  return true;
}

}  // namespace

struct CheckpointMirror::RemoteChain {
  std::vector<nlohmann::json> markers;  // layers 0..k-1, one fingerprint
  std::string fingerprint;
  int64_t newest_written_unix_s = 0;
};

std::string CheckpointPrefixUri(const std::string& output_uri, const std::string& job_id) {
  return storage::JoinUri(storage::JoinUri(output_uri, ".quark-checkpoints"), job_id);
}

absl::StatusOr<std::string> ModelIdentity(storage::ObjectStore& store, const std::string& model_uri) {
  absl::StatusOr<std::vector<storage::ObjectInfo>> listed = store.List(model_uri);
  if (!listed.ok()) return listed.status();
  nlohmann::json objects = nlohmann::json::array();
  for (const storage::ObjectInfo& info : *listed) {
    int64_t mtime = 0;
    if (absl::StatusOr<fs::path> local = store.LocalPath(info.uri); local.ok()) {
      std::error_code ec;
      mtime = static_cast<int64_t>(fs::last_write_time(*local, ec).time_since_epoch().count());
    }
    objects.push_back(
        {info.uri.substr(std::min(info.uri.size(), model_uri.size())), info.size_bytes, info.etag, mtime});
  }
  return nlohmann::json({{"model_uri", model_uri}, {"objects", objects}}).dump();
}

CheckpointMirror::CheckpointMirror(std::shared_ptr<storage::ObjectStore> store, std::string prefix_uri,
                                   fs::path local_dir, CheckpointMirrorOptions options,
                                   std::function<void(const std::string&)> log)
    : store_(std::move(store)),
      prefix_(std::move(prefix_uri)),
      local_dir_(std::move(local_dir)),
      options_(std::move(options)),
      log_(std::move(log)) {}

absl::StatusOr<CheckpointMirror::RemoteChain> CheckpointMirror::ReadChain() {
  absl::StatusOr<std::vector<storage::ObjectInfo>> listed = store_->List(prefix_);
  if (!listed.ok()) return listed.status();
  std::set<std::string> uris;
  for (const storage::ObjectInfo& info : *listed) uris.insert(info.uri);
  RemoteChain chain;
  for (int64_t i = 0;; ++i) {
    const std::string uri = storage::JoinUri(prefix_, MarkerName(i));
    if (uris.count(uri) == 0) break;
    absl::StatusOr<std::string> text = store_->GetBytes(uri);
    const nlohmann::json marker =
        text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json(nlohmann::json::value_t::discarded);
    if (!ValidMarker(marker, i)) {
      log_(str::Cat("checkpoint: ", uri, " is unreadable; layers from ", i, " on are not restored"));
      break;
    }
    if (i == 0) chain.fingerprint = marker["fingerprint"].get<std::string>();
    if (marker["fingerprint"] != chain.fingerprint) {
      log_(str::Cat("checkpoint: ", uri, " was left by a run with other inputs; layers from ", i,
                    " on are not restored"));
      break;
    }
    chain.newest_written_unix_s = std::max(chain.newest_written_unix_s, marker["written_unix_s"].get<int64_t>());
    chain.markers.push_back(marker);
  }
  return chain;
}

absl::StatusOr<int64_t> CheckpointMirror::Restore() {
  absl::StatusOr<RemoteChain> chain = ReadChain();
  if (!chain.ok()) return chain.status();
  uploaded_ = 0;
  remote_fingerprint_.clear();
  if (chain->markers.empty()) return 0;
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(options_.now().time_since_epoch()).count();
  const int64_t age_s = now_s - chain->newest_written_unix_s;
  if (age_s > options_.max_age.count()) {
    log_(str::Cat("checkpoint ", prefix_, " expired (its newest layer is ", age_s, " s old, expiry ",
                  options_.max_age.count(), " s): deleted, not restored"));
    if (absl::Status removed = Remove(); !removed.ok()) log_(str::Cat("checkpoint: ", removed.message()));
    return 0;
  }
  const int64_t remote_layers = static_cast<int64_t>(chain->markers.size());
  const nlohmann::json local = LocalState(local_dir_);
  if (!local.is_null() && local["finished_layers"].get<int64_t>() >= remote_layers) {
    // This worker's own checkpoint goes as far: keep it; the layers it has beyond the remote go up next.
    remote_fingerprint_ = chain->fingerprint;
    uploaded_ = remote_layers;
    return 0;
  }
  if (absl::Status downloaded = Download(*chain); !downloaded.ok()) return downloaded;
  return uploaded_;
}

absl::Status CheckpointMirror::Download(const RemoteChain& chain) {
  const auto started = std::chrono::steady_clock::now();
  const fs::path staging = local_dir_.string() + ".download";
  std::error_code ec;
  fs::remove_all(staging, ec);
  int64_t layers = 0;
  for (const nlohmann::json& marker : chain.markers) {
    std::string damage;
    for (const auto& [path, object] : marker["objects"].items()) {
      const std::string uri = storage::JoinUri(prefix_, path);
      const fs::path file = staging / path;
      if (absl::Status got = store_->GetFile(uri, file); !got.ok()) {
        damage = std::string(got.message());
        break;
      }
      absl::StatusOr<std::string> sha = Sha256FileHex(file);
      const auto size = static_cast<int64_t>(fs::file_size(file, ec));
      if (!sha.ok() || *sha != object["sha256"].get<std::string>() || size != object["size"].get<int64_t>()) {
        damage = str::Cat(uri, ": ", size, " bytes, sha256 ", sha.ok() ? *sha : "?", " where the marker names ",
                          object["size"].get<int64_t>(), " bytes, sha256 ", object["sha256"].get<std::string>());
        break;
      }
    }
    if (!damage.empty()) {
      fs::remove_all(staging / LayerName(layers), ec);
      fs::remove(staging / (LayerName(layers) + ".json"), ec);
      log_(str::Cat("checkpoint: layer ", layers, " does not match its commit marker (", damage,
                    "); restoring layers 0..", layers - 1, " only"));
      break;
    }
    ++layers;
  }
  if (layers == 0) {
    fs::remove_all(staging, ec);
    return absl::OkStatus();
  }
  const nlohmann::json state = {{"fingerprint", chain.fingerprint}, {"finished_layers", layers}};
  std::ofstream(staging / "state.json", std::ios::binary) << state.dump(1);
  fs::remove_all(local_dir_, ec);
  fs::create_directories(local_dir_.parent_path(), ec);
  fs::rename(staging, local_dir_, ec);
  if (ec) return absl::InternalError(str::Cat("checkpoint: ", local_dir_.string(), ": ", ec.message()));
  remote_fingerprint_ = chain.fingerprint;
  uploaded_ = layers;
  log_(str::Cat("checkpoint: restored layers 0..", layers - 1, " from ", prefix_, " (", SecondsSince(started), " s)"));
  return absl::OkStatus();
}

std::string CheckpointMirror::LocalFingerprint() const {
  const nlohmann::json state = LocalState(local_dir_);
  return state.is_null() ? std::string() : state["fingerprint"].get<std::string>();
}

absl::Status CheckpointMirror::UploadThrough(int64_t finished_layers) {
  const std::string fingerprint = LocalFingerprint();
  if (fingerprint.empty()) {
    return absl::InternalError(str::Cat("checkpoint: ", local_dir_.string(), "/state.json: missing or unreadable"));
  }
  if (fingerprint != remote_fingerprint_) {
    // A fresh run (or one whose inputs changed): whatever the prefix holds belongs to no layer of it.
    if (absl::Status removed = Remove(); !removed.ok()) {
      log_(str::Cat("checkpoint upload: ", removed.message()));
      return removed;
    }
    uploaded_ = 0;
    remote_fingerprint_ = fingerprint;
  }
  while (uploaded_ < finished_layers) {
    const auto started = std::chrono::steady_clock::now();
    int64_t bytes = 0;
    if (absl::Status status = UploadLayer(uploaded_, fingerprint, &bytes); !status.ok()) {
      log_(str::Cat("checkpoint upload of layer ", uploaded_, " failed (", status.message(),
                    "); retried after the next layer, a retry of the job resumes at layer ", uploaded_));
      return status;
    }
    log_(str::Cat("checkpoint: layer ", uploaded_, " uploaded to ", prefix_, " (", bytes, " bytes, ",
                  SecondsSince(started), " s)"));
    ++uploaded_;
  }
  return absl::OkStatus();
}

absl::Status CheckpointMirror::UploadLayer(int64_t index, const std::string& fingerprint, int64_t* bytes) {
  nlohmann::json objects = nlohmann::json::object();
  for (const std::string& path : LayerFiles(local_dir_, index)) {
    const fs::path file = local_dir_ / path;
    absl::StatusOr<std::string> sha = Sha256FileHex(file);
    if (!sha.ok()) return sha.status();
    std::error_code ec;
    const auto size = static_cast<int64_t>(fs::file_size(file, ec));
    if (ec) return absl::InternalError(str::Cat(file.string(), ": ", ec.message()));
    if (absl::Status put = store_->PutFile(storage::JoinUri(prefix_, path), file); !put.ok()) return put;
    objects[path] = {{"size", size}, {"sha256", *sha}};
    *bytes += size;
  }
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(options_.now().time_since_epoch()).count();
  const nlohmann::json marker = {
      {"layer", index}, {"fingerprint", fingerprint}, {"written_unix_s", now_s}, {"objects", objects}};
  // Last: until the marker is there, the layer's objects count for nothing.
  return store_->PutBytes(storage::JoinUri(prefix_, MarkerName(index)), marker.dump(1));
}

absl::Status CheckpointMirror::Remove() {
  absl::StatusOr<std::vector<storage::ObjectInfo>> listed = store_->List(prefix_);
  if (!listed.ok()) return listed.status();
  // Markers first, from the top: a removal cut short leaves a shorter valid chain, never a marker without objects.
  std::vector<storage::ObjectInfo> objects = *std::move(listed);
  const auto markers_end = std::stable_partition(objects.begin(), objects.end(), [](const storage::ObjectInfo& info) {
    return str::Contains(info.uri, "/commit-");
  });
  std::reverse(objects.begin(), markers_end);
  for (const storage::ObjectInfo& info : objects) {
    if (absl::Status deleted = store_->Delete(info.uri); !deleted.ok()) return deleted;
  }
  uploaded_ = 0;
  RemoveEmptyFolders();
  return absl::OkStatus();
}

void CheckpointMirror::RemoveEmptyFolders() const {
  // A file:// store leaves the folders behind; those of this prefix (and .quark-checkpoints when it is empty) go.
  absl::StatusOr<fs::path> local = store_->LocalPath(prefix_);
  if (!local.ok()) return;
  std::error_code ec;
  std::vector<fs::path> folders;
  for (const auto& entry : fs::recursive_directory_iterator(*local, ec)) {
    if (entry.is_directory(ec)) folders.push_back(entry.path());
  }
  std::sort(folders.rbegin(), folders.rend());  // children before their parents
  folders.push_back(*local);
  folders.push_back(local->parent_path());
  for (const fs::path& folder : folders) {
    if (fs::is_empty(folder, ec)) fs::remove(folder, ec);
  }
}

}  // namespace quark::worker
