// A job's per-layer checkpoints (core/quantize/layer_checkpoint.h) copied to object storage after each finished
// layer, so that the job's retry on ANY worker (a fresh data dir) resumes at the last finished layer (#34 item 1).
//
//   <prefix>/layer-<i>/...            the local layer folder's files, as they are
//   <prefix>/layer-<i>.json           the layer's log lines
//   <prefix>/commit-<i>.json          {"layer": i, "fingerprint", "written_unix_s",
//                                      "objects": {"<relative path>": {"size", "sha256"}}}  (written last)
//
// A layer counts only once its commit marker is there and every object it names has that size and SHA-256 when
// downloaded: a layer cut off mid-upload (no marker, or objects a later attempt overwrote) is never restored, and
// the restore stops before it. The layers restored are 0..k-1 with one fingerprint, layer 0's; the engine then
// compares that fingerprint with its own run's and discards the checkpoint when they differ.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/storage/object_store.h"

namespace quark::worker {

struct CheckpointMirrorOptions {
  /// A remote checkpoint whose newest commit marker is older than this is expired: deleted when found, never
  /// restored (quark-worker --checkpoint-expiry-s).
  std::chrono::seconds max_age{7 * 24 * 3600};
  /// The clock of the expiry (tests inject one).
  std::function<std::chrono::system_clock::time_point()> now = [] { return std::chrono::system_clock::now(); };
};

/// Not thread-safe: one job's runner (and the engine thread it calls) uses it, one call at a time.
class CheckpointMirror {
 public:
  /// `store` is the job's (confined to the tenant, with its keys); `log` receives the job's event lines.
  CheckpointMirror(std::shared_ptr<storage::ObjectStore> store, std::string prefix_uri, std::filesystem::path local_dir,
                   CheckpointMirrorOptions options, std::function<void(const std::string&)> log);

  /// Brings the remote checkpoint into local_dir when it holds more valid layers than local_dir does (replacing
  /// local_dir, state.json written last). Returns the number of layers local_dir now holds from the remote (0 when
  /// the local one was kept or there was none). A damaged or expired remote is no error: it is logged (and an
  /// expired one deleted) and the run starts from what it has. Errors: the store's, on listing the prefix.
  absl::StatusOr<int64_t> Restore();

  /// Uploads the local layers from the first one not yet uploaded up to `finished_layers` - 1, each layer's files
  /// then its commit marker. A failed upload is logged and retried at the next call (layers go up in order); the
  /// status says whether every layer up to `finished_layers` is now remote.
  absl::Status UploadThrough(int64_t finished_layers);

  /// Deletes every object below the prefix (after success, or a failure a retry would not change).
  absl::Status Remove();

  /// Layers 0..uploaded()-1 are committed remotely.
  int64_t uploaded() const { return uploaded_; }
  const std::string& prefix_uri() const { return prefix_; }

 private:
  struct RemoteChain;
  absl::StatusOr<RemoteChain> ReadChain();
  absl::Status Download(const RemoteChain& chain);
  absl::Status UploadLayer(int64_t index, const std::string& fingerprint, int64_t* bytes);
  std::string LocalFingerprint() const;
  void RemoveEmptyFolders() const;

  std::shared_ptr<storage::ObjectStore> store_;
  std::string prefix_;
  std::filesystem::path local_dir_;
  CheckpointMirrorOptions options_;
  std::function<void(const std::string&)> log_;
  int64_t uploaded_ = 0;
  std::string remote_fingerprint_;  // the fingerprint of the committed remote layers
};

/// "<output_uri>/.quark-checkpoints/<job id>": below the job's output prefix, hence within the tenant's output
/// prefixes whenever the output is (quarkd refuses any other output at submit).
std::string CheckpointPrefixUri(const std::string& output_uri, const std::string& job_id);

/// The model as every worker sees it (PipelineRequest::checkpoint_identity): its URI and each object's name, size
/// and ETag (s3://) or modification time (file://). The store's errors on listing the model.
absl::StatusOr<std::string> ModelIdentity(storage::ObjectStore& store, const std::string& model_uri);

}  // namespace quark::worker
