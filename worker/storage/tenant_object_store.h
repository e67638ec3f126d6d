// A job's storage confined to its tenant's roots (quarkd's tokens file: model_roots, output_prefixes), on top of
// the worker's own confinement (--allowed-roots). quarkd checks a job's URIs at submit; the names may change
// after that (a folder swapped for a symlink into another tenant's root), so the worker checks again where it
// opens the files: file:// reads and writes go through FileObjectStores whose roots are the tenant's folders, so
// the O_NOFOLLOW walk, the pinned model folder and the symlinks inside it are held to the tenant's roots.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "worker/storage/file_object_store.h"
#include "worker/storage/object_store.h"

namespace quark::storage {

/// The tenant's roots as quarkd's tokens file names them: "file:///dir" or "s3://bucket/prefix". An empty list
/// leaves that side to the worker's own confinement (as quarkd does for a tenant without that list).
struct TenantRoots {
  std::vector<std::string> model_roots;      // reads: model, calibration and evaluation URIs
  std::vector<std::string> output_prefixes;  // writes: output_uri (and reads of what the job wrote)

  bool empty() const { return model_roots.empty() && output_prefixes.empty(); }
};

/// Whether `uri` lies under one of `prefixes` (lexically: same scheme, same bucket, key or path below the prefix
/// at a '/' boundary, no "." or ".." segment). PERMISSION_DENIED "<field>: <uri> is outside <what> [...]" when not.
absl::Status CheckUnderPrefixes(std::string_view field, std::string_view uri, const std::vector<std::string>& prefixes,
                                std::string_view what);

/// Thread-safe (as its parts). Reads (GetBytes, GetFile, Head, List, LocalPath, PinFolder) must lie under the
/// model roots or the output prefixes, writes (PutFile, PutBytes, Delete) under the output prefixes; otherwise
/// PERMISSION_DENIED naming the URI and the tenant's roots, checked lexically first and then, for file://, on the
/// resolved path at open time. s3:// URIs that pass go to `inner`; file:// URIs to stores over the tenant's
/// folders, each clipped to the worker's `worker_roots` (a tenant root outside them allows nothing).
class TenantObjectStore : public ObjectStore {
 public:
  TenantObjectStore(std::shared_ptr<ObjectStore> inner, TenantRoots roots,
                    const std::vector<std::filesystem::path>& worker_roots);

  /// The lexical checks of a job's URIs before anything is fetched (a cached s3:// model is never asked of the
  /// store): `field` names the request field in the error.
  absl::Status CheckRead(std::string_view field, std::string_view uri) const;
  absl::Status CheckWrite(std::string_view field, std::string_view uri) const;

  absl::Status PutFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::Status PutBytes(std::string_view uri, std::string_view bytes) override;
  absl::StatusOr<std::string> GetBytes(std::string_view uri) override;
  absl::Status GetFile(std::string_view uri, const std::filesystem::path& file) override;
  absl::StatusOr<ObjectInfo> Head(std::string_view uri) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(std::string_view prefix_uri) override;
  absl::Status Delete(std::string_view uri) override;
  absl::StatusOr<std::filesystem::path> LocalPath(std::string_view uri) override;
  absl::StatusOr<std::shared_ptr<PinnedFolder>> PinFolder(std::string_view uri,
                                                          const std::filesystem::path& view_dir) override;

  /// The folders file:// reads and writes are confined to (canonical), for tests and error messages.
  const std::vector<std::filesystem::path>& read_folders() const { return read_folders_; }
  const std::vector<std::filesystem::path>& write_folders() const { return write_folders_; }

 private:
  /// The store a read (or write) of `uri` goes to after the lexical check.
  absl::StatusOr<ObjectStore*> ForRead(std::string_view uri) const;
  absl::StatusOr<ObjectStore*> ForWrite(std::string_view uri) const;

  std::shared_ptr<ObjectStore> inner_;
  TenantRoots roots_;
  std::vector<std::string> read_prefixes_;  // model_roots + output_prefixes
  std::vector<std::filesystem::path> read_folders_;
  std::vector<std::filesystem::path> write_folders_;
  std::unique_ptr<FileObjectStore> file_reader_;
  std::unique_ptr<FileObjectStore> file_writer_;
};

/// The parts of `tenant_roots` (file:// URIs) inside `worker_roots`, canonical: a tenant root inside a worker root
/// stays, a worker root inside a tenant root is taken instead, disjoint ones are dropped.
std::vector<std::filesystem::path> ClipFileRoots(const std::vector<std::string>& tenant_roots,
                                                 const std::vector<std::filesystem::path>& worker_roots);

}  // namespace quark::storage
