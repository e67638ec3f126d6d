#include "worker/storage/tenant_object_store.h"

#include <algorithm>
#include <system_error>

#include "worker/storage/object_uri.h"
#include "worker/storage/pinned_folder.h"
#include "worker/storage/strings.h"

namespace quark::storage {
namespace fs = std::filesystem;
namespace {

// The parts of a '/'-separated name; "." and ".." (and empty parts but the last) make it unfit for a lexical check.
bool HasDotSegments(std::string_view name) {
  for (std::string_view part : str::Split(name, '/')) {
    if (part == "." || part == "..") return true;
  }
  return false;
}

bool KeyUnder(std::string_view key, std::string_view prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  if (prefix.empty()) return true;
  return key == prefix || (str::StartsWith(key, prefix) && key[prefix.size()] == '/');
}

bool UnderPrefix(const ObjectUri& uri, std::string_view prefix) {
  absl::StatusOr<ObjectUri> root = ParseObjectUri(prefix);
  if (!root.ok() || root->scheme != uri.scheme) return false;
  if (uri.scheme == ObjectUri::Scheme::kS3) return root->bucket == uri.bucket && KeyUnder(uri.key, root->key);
  return IsInsideRoot(fs::path(uri.key).lexically_normal(), fs::path(root->key).lexically_normal());
}

bool IsFile(std::string_view uri) {
  absl::StatusOr<ObjectUri> parsed = ParseObjectUri(uri);
  return parsed.ok() && parsed->scheme == ObjectUri::Scheme::kFile;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

absl::Status CheckUnderPrefixes(std::string_view field, std::string_view uri, const std::vector<std::string>& prefixes,
                                std::string_view what) {
  absl::StatusOr<ObjectUri> parsed = ParseObjectUri(uri);
  if (!parsed.ok()) return absl::InvalidArgumentError(str::Cat(field, ": ", parsed.status().message()));
  bool under = !HasDotSegments(parsed->key) &&
               std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return UnderPrefix(*parsed, p); });
  if (under) return absl::OkStatus();
  return absl::PermissionDeniedError(
      str::Cat(field, ": ", uri, " is outside ", what, " [", str::Join(prefixes, ", "), "]"));
}

std::vector<fs::path> ClipFileRoots(const std::vector<std::string>& tenant_roots, const std::vector<fs::path>& worker_roots) {
  std::vector<fs::path> out;
  auto add = [&](const fs::path& folder) {
    if (std::find(out.begin(), out.end(), folder) == out.end()) out.push_back(folder);
  };
  for (const std::string& root : tenant_roots) {
    absl::StatusOr<ObjectUri> parsed = ParseObjectUri(root);
    if (!parsed.ok() || parsed->scheme != ObjectUri::Scheme::kFile) continue;
    std::error_code ec;
    fs::path tenant = fs::weakly_canonical(fs::path(parsed->key).lexically_normal(), ec);
    if (ec) continue;
    for (const fs::path& worker_root : worker_roots) {
      fs::path worker = fs::weakly_canonical(fs::absolute(worker_root), ec);
      if (ec) continue;
      if (IsInsideRoot(tenant, worker)) add(tenant);
      else if (IsInsideRoot(worker, tenant)) add(worker);
    }
  }
  return out;
}

TenantObjectStore::TenantObjectStore(std::shared_ptr<ObjectStore> inner, TenantRoots roots,
                                     const std::vector<fs::path>& worker_roots)
    : inner_(std::move(inner)), roots_(std::move(roots)) {
  read_prefixes_ = Concat(roots_.model_roots, roots_.output_prefixes);
  read_folders_ = ClipFileRoots(read_prefixes_, worker_roots);
  write_folders_ = ClipFileRoots(roots_.output_prefixes, worker_roots);
  file_reader_ = std::make_unique<FileObjectStore>(read_folders_, FileObjectStore::Roots::kKeepMissing);
  file_writer_ = std::make_unique<FileObjectStore>(write_folders_, FileObjectStore::Roots::kKeepMissing);
}

absl::Status TenantObjectStore::CheckRead(std::string_view field, std::string_view uri) const {
  if (roots_.model_roots.empty()) return absl::OkStatus();
  return CheckUnderPrefixes(field, uri, read_prefixes_, "the tenant's model_roots and output_prefixes");
}

absl::Status TenantObjectStore::CheckWrite(std::string_view field, std::string_view uri) const {
  if (roots_.output_prefixes.empty()) return absl::OkStatus();
  return CheckUnderPrefixes(field, uri, roots_.output_prefixes, "the tenant's output_prefixes");
}

absl::StatusOr<ObjectStore*> TenantObjectStore::ForRead(std::string_view uri) const {
  if (roots_.model_roots.empty()) return inner_.get();
  if (absl::Status status = CheckRead("uri", uri); !status.ok()) return status;
  return IsFile(uri) ? file_reader_.get() : inner_.get();
}

absl::StatusOr<ObjectStore*> TenantObjectStore::ForWrite(std::string_view uri) const {
  if (roots_.output_prefixes.empty()) return inner_.get();
  if (absl::Status status = CheckWrite("uri", uri); !status.ok()) return status;
  return IsFile(uri) ? file_writer_.get() : inner_.get();
}

absl::Status TenantObjectStore::PutFile(std::string_view uri, const fs::path& file) {
  absl::StatusOr<ObjectStore*> store = ForWrite(uri);
  return store.ok() ? (*store)->PutFile(uri, file) : store.status();
}

absl::Status TenantObjectStore::PutBytes(std::string_view uri, std::string_view bytes) {
  absl::StatusOr<ObjectStore*> store = ForWrite(uri);
  return store.ok() ? (*store)->PutBytes(uri, bytes) : store.status();
}

absl::Status TenantObjectStore::Delete(std::string_view uri) {
  absl::StatusOr<ObjectStore*> store = ForWrite(uri);
  return store.ok() ? (*store)->Delete(uri) : store.status();
}

absl::StatusOr<std::string> TenantObjectStore::GetBytes(std::string_view uri) {
  absl::StatusOr<ObjectStore*> store = ForRead(uri);
  if (!store.ok()) return store.status();
  return (*store)->GetBytes(uri);
}

absl::Status TenantObjectStore::GetFile(std::string_view uri, const fs::path& file) {
  absl::StatusOr<ObjectStore*> store = ForRead(uri);
  return store.ok() ? (*store)->GetFile(uri, file) : store.status();
}

absl::StatusOr<ObjectInfo> TenantObjectStore::Head(std::string_view uri) {
  // Publish checks what it wrote: a size is readable under the read roots or where the job may write.
  absl::StatusOr<ObjectStore*> store = ForRead(uri);
  if (!store.ok()) store = ForWrite(uri);
  if (!store.ok()) return store.status();
  return (*store)->Head(uri);
}

absl::StatusOr<std::vector<ObjectInfo>> TenantObjectStore::List(std::string_view prefix_uri) {
  absl::StatusOr<ObjectStore*> store = ForRead(prefix_uri);
  if (!store.ok()) return store.status();
  return (*store)->List(prefix_uri);
}

absl::StatusOr<fs::path> TenantObjectStore::LocalPath(std::string_view uri) {
  absl::StatusOr<ObjectStore*> store = ForRead(uri);
  if (!store.ok()) return store.status();
  return (*store)->LocalPath(uri);
}

absl::StatusOr<std::shared_ptr<PinnedFolder>> TenantObjectStore::PinFolder(std::string_view uri,
                                                                           const fs::path& view_dir) {
  absl::StatusOr<ObjectStore*> store = ForRead(uri);
  if (!store.ok()) return store.status();
  return (*store)->PinFolder(uri, view_dir);
}

}  // namespace quark::storage
