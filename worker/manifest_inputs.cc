#include "worker/manifest_inputs.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/base/digest.h"
#include "quark/version.h"
#include "worker/storage/strings.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<nlohmann::json> FileEntry(const fs::path& path, const std::string& what) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return absl::InternalError(str::Cat(what, ": cannot read the size of ", path.string(), ": ", ec.message()));
  absl::StatusOr<std::string> sha256 = Sha256FileHex(path);
  if (!sha256.ok()) return absl::Status(sha256.status().code(), str::Cat(what, ": ", sha256.status().message()));
  return nlohmann::json{{"size_bytes", size}, {"sha256", *sha256}};
}

}  // namespace

absl::StatusOr<nlohmann::json> ManifestInputs(const quark::v1::JobSpec& spec, const PipelineRequest& request) {
  nlohmann::json inputs = nlohmann::json::object();
  // The model folder's files, by their path in the folder (sorted), as the pipeline read them.
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(request.model_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  if (ec) return absl::InternalError(str::Cat("model: cannot list ", request.model_dir.string(), ": ", ec.message()));
  std::sort(files.begin(), files.end());
  nlohmann::json model_files = nlohmann::json::array();
  for (const fs::path& file : files) {
    const std::string relative = file.lexically_relative(request.model_dir).generic_string();
    absl::StatusOr<nlohmann::json> entry = FileEntry(file, "model");
    if (!entry.ok()) return entry.status();
    (*entry)["path"] = relative;
    model_files.push_back(*std::move(entry));
  }
  inputs["model"] = {{"uri", spec.model_uri()}, {"files", std::move(model_files)}};
  const struct {
    const char* name;
    const std::string& uri;
    const fs::path& local;
  } singles[] = {{"calibration", spec.calibration().uri(), request.calibration_file},
                 {"evaluation", spec.evaluation().uri(), request.evaluation_file},
                 {"gguf_imatrix", spec.gguf_imatrix_uri(), request.gguf_imatrix_file}};
  for (const auto& single : singles) {
    if (single.uri.empty() || single.local.empty()) continue;
    absl::StatusOr<nlohmann::json> entry = FileEntry(single.local, single.name);
    if (!entry.ok()) return entry.status();
    (*entry)["uri"] = single.uri;
    inputs[single.name] = *std::move(entry);
  }
  return inputs;
}

nlohmann::json ManifestBuild() {
#ifdef NDEBUG
  constexpr const char* kBuildType = "optimized";
#else
  constexpr const char* kBuildType = "debug";
#endif
  return {{"engine_version", QUARK_ENGINE_VERSION}, {"compiler", __VERSION__}, {"build_type", kBuildType}};
}

}  // namespace quark::worker
