#include "worker/storage/routing_object_store.h"
#include "worker/storage/strings.h"

#include "worker/storage/file_object_store.h"
#include "worker/storage/object_uri.h"
#include "worker/storage/s3_object_store.h"

namespace quark::storage {

RoutingObjectStore::RoutingObjectStore(std::unique_ptr<ObjectStore> file_store,
                                       std::unique_ptr<ObjectStore> s3_store)
    : file_store_(std::move(file_store)), s3_store_(std::move(s3_store)) {}

absl::StatusOr<ObjectStore*> RoutingObjectStore::For(std::string_view uri) const {
  absl::StatusOr<ObjectUri> parsed = ParseObjectUri(uri);
  if (!parsed.ok()) return parsed.status();
  ObjectStore* store = parsed->scheme == ObjectUri::Scheme::kS3 ? s3_store_.get() : file_store_.get();
  if (store == nullptr) {
    return absl::FailedPreconditionError(str::Cat("uri: ", uri, ": this process has no store configured for ",
                                                      parsed->scheme == ObjectUri::Scheme::kS3 ? "s3" : "file",
                                                      " URIs"));
  }
  return store;
}

absl::Status RoutingObjectStore::PutFile(std::string_view uri, const std::filesystem::path& file) {
  absl::StatusOr<ObjectStore*> store = For(uri);
  return store.ok() ? (*store)->PutFile(uri, file) : store.status();
}

absl::Status RoutingObjectStore::PutBytes(std::string_view uri, std::string_view bytes) {
  absl::StatusOr<ObjectStore*> store = For(uri);
  return store.ok() ? (*store)->PutBytes(uri, bytes) : store.status();
}

absl::StatusOr<std::string> RoutingObjectStore::GetBytes(std::string_view uri) {
  absl::StatusOr<ObjectStore*> store = For(uri);
  if (!store.ok()) return store.status();
  return (*store)->GetBytes(uri);
}

absl::Status RoutingObjectStore::GetFile(std::string_view uri, const std::filesystem::path& file) {
  absl::StatusOr<ObjectStore*> store = For(uri);
  return store.ok() ? (*store)->GetFile(uri, file) : store.status();
}

absl::StatusOr<ObjectInfo> RoutingObjectStore::Head(std::string_view uri) {
  absl::StatusOr<ObjectStore*> store = For(uri);
  if (!store.ok()) return store.status();
  return (*store)->Head(uri);
}

absl::StatusOr<std::vector<ObjectInfo>> RoutingObjectStore::List(std::string_view prefix_uri) {
  absl::StatusOr<ObjectStore*> store = For(prefix_uri);
  if (!store.ok()) return store.status();
  return (*store)->List(prefix_uri);
}

absl::Status RoutingObjectStore::Delete(std::string_view uri) {
  absl::StatusOr<ObjectStore*> store = For(uri);
  return store.ok() ? (*store)->Delete(uri) : store.status();
}

absl::StatusOr<std::filesystem::path> RoutingObjectStore::LocalPath(std::string_view uri) {
  absl::StatusOr<ObjectStore*> store = For(uri);
  if (!store.ok()) return store.status();
  return (*store)->LocalPath(uri);
}

absl::StatusOr<std::shared_ptr<PinnedFolder>> RoutingObjectStore::PinFolder(std::string_view uri,
                                                                            const std::filesystem::path& view_dir) {
  absl::StatusOr<ObjectStore*> store = For(uri);
  if (!store.ok()) return store.status();
  return (*store)->PinFolder(uri, view_dir);
}

std::shared_ptr<ObjectStore> MakeObjectStore(const StorageOptions& options) {
  std::unique_ptr<ObjectStore> s3;
  if (options.s3) s3 = std::make_unique<S3ObjectStore>(*options.s3);
  return std::make_shared<RoutingObjectStore>(std::make_unique<FileObjectStore>(options.file_roots), std::move(s3));
}

}  // namespace quark::storage
