// The artifact and model storage interface. Objects are named by full URIs (file:///abs/path, s3://bucket/key);
// each implementation accepts its own scheme and answers INVALID_ARGUMENT for others.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace quark::storage {

class PinnedFolder;

struct ObjectInfo {
  std::string uri;
  int64_t size_bytes = 0;
  /// S3: the ETag without quotes (an MD5 hex for single-part uploads); file: empty.
  std::string etag;
};

/// Implementations are thread-safe. Errors name the URI: NOT_FOUND (no such object), PERMISSION_DENIED (outside
/// the allowed roots, or refused by the store), UNAVAILABLE (the store did not answer after retries), DATA_LOSS (a
/// checksum did not match), INVALID_ARGUMENT (a malformed URI).
class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  /// Uploads the local file `file` to `uri`, replacing any object there. Readers never see a partial object.
  virtual absl::Status PutFile(std::string_view uri, const std::filesystem::path& file) = 0;
  /// Writes `bytes` to `uri`, replacing any object there, atomically.
  virtual absl::Status PutBytes(std::string_view uri, std::string_view bytes) = 0;
  /// Reads a whole object into memory.
  virtual absl::StatusOr<std::string> GetBytes(std::string_view uri) = 0;
  /// Downloads `uri` into the local file `file` (created with its parent folders; replaced atomically).
  virtual absl::Status GetFile(std::string_view uri, const std::filesystem::path& file) = 0;
  /// Size (and ETag) of one object; NOT_FOUND when absent.
  virtual absl::StatusOr<ObjectInfo> Head(std::string_view uri) = 0;
  /// Every object below the folder `prefix_uri` (recursively), sorted by URI. A missing folder is an empty list.
  /// The prefix is a folder: "s3://b/models/llama" lists "s3://b/models/llama/..." and not ".../llama2/...".
  virtual absl::StatusOr<std::vector<ObjectInfo>> List(std::string_view prefix_uri) = 0;
  /// Removes one object; OK when it did not exist.
  virtual absl::Status Delete(std::string_view uri) = 0;

  /// The local path of `uri` when this store keeps it on this machine's disk (file://, after the confinement
  /// check), so a model folder can be read in place; UNIMPLEMENTED for remote stores.
  virtual absl::StatusOr<std::filesystem::path> LocalPath(std::string_view uri) {
    return absl::UnimplementedError(std::string(uri) + ": not a local object");
  }
  /// The local folder at `uri` held open: every file below it is reached through a descriptor opened after the
  /// confinement checks, by names in `view_dir` (see PinnedFolder). UNIMPLEMENTED for remote stores.
  virtual absl::StatusOr<std::shared_ptr<PinnedFolder>> PinFolder(std::string_view uri,
                                                                  const std::filesystem::path& view_dir) {
    (void)view_dir;
    return absl::UnimplementedError(std::string(uri) + ": not a local object");
  }
};

}  // namespace quark::storage
