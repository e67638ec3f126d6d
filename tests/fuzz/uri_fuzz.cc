// libFuzzer target for the URIs that requests name: the worker's ParseObjectUri (worker/storage/object_uri.cc) and
// the server's UriPolicy (server/api/uri_policy.cc), and that the two agree: a URI the server lets through must be
// one the worker can parse, and a file:// URI it accepts must lie inside an allowed root.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "server/api/uri_policy.h"
#include "worker/storage/object_uri.h"

namespace {

namespace fs = std::filesystem;

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

// A small allowed root with a folder, a file and a symlink out of it, made once per process and removed at exit.
fs::path RootDir() { return fs::temp_directory_path() / ("quark-uri-fuzz-" + std::to_string(getpid())); }

const std::string& Root() {
  static const std::string root = [] {
    const fs::path dir = RootDir();
    fs::create_directories(dir / "models" / "m");
    std::ofstream(dir / "models" / "m" / "config.json") << "{}";
    std::error_code ignored;
    fs::create_symlink("/etc", dir / "models" / "out", ignored);
    // Runs after `root` is destroyed (registered before it is constructed): the path is made again.
    std::atexit([] {
      std::error_code error;
      fs::remove_all(RootDir(), error);
    });
    return fs::canonical(dir).string();
  }();
  return root;
}

bool Under(const std::string& path, const std::string& root) {
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string uri(reinterpret_cast<const char*>(data), size);

  auto parsed = quark::storage::ParseObjectUri(uri);
  if (parsed.ok()) {
    // The canonical spelling parses to the same object.
    auto again = quark::storage::ParseObjectUri(parsed->ToString());
    Check(again.ok() && again->scheme == parsed->scheme && again->bucket == parsed->bucket && again->key == parsed->key);
    if (parsed->scheme == quark::storage::ObjectUri::Scheme::kS3) Check(!parsed->bucket.empty());
    if (parsed->scheme == quark::storage::ObjectUri::Scheme::kFile) Check(!parsed->key.empty() && parsed->key[0] == '/');
  }
  (void)quark::storage::JoinUri(uri, uri);

  static const quark::server::UriPolicy policy({Root()});
  const absl::Status status = policy.Check("spec.model_uri", uri, /*required=*/true);
  if (status.ok()) {
    Check(parsed.ok());
    if (parsed->scheme == quark::storage::ObjectUri::Scheme::kFile) {
      std::error_code error;
      const fs::path resolved = fs::weakly_canonical(fs::path(parsed->key), error);
      Check(error || Under(resolved.lexically_normal().string(), Root()));
    } else {
      Check(parsed->key.empty() || parsed->key[0] != '/');
    }
  }
  static const std::vector<std::string> prefixes = {"s3://bucket/tenant", "file://" + Root() + "/models"};
  (void)quark::server::UriPolicy::CheckScope("spec.model_uri", uri, prefixes, "the tenant's model_roots");
  (void)quark::server::UriPolicy::FilePath(uri);
  return 0;
}
