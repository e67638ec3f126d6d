#include "worker/copy_pipeline.h"

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include "worker/storage/strings.h"

namespace quark::worker {
namespace fs = std::filesystem;
namespace {

constexpr int kSteps = 10;
constexpr int64_t kMaxCopyMs = 3'600'000;

absl::StatusOr<int64_t> CopyMs(const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long long ms = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || end != value.c_str() + value.size() || ms < 0 || ms > kMaxCopyMs) {
    return absl::InvalidArgumentError(str::Cat("spec.labels[\"", kTestCopyLabel, "\"]: \"", value,
                                               "\" is not a whole number of ms in 0..", kMaxCopyMs));
  }
  return static_cast<int64_t>(ms);
}

// One file through the page cache and back: a full disk fails here (write or close), not later.
absl::Status CopyOne(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (!ec) fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (!ec) return absl::OkStatus();
  const std::string what = str::Cat("copy of ", from.filename().string(), " to ", to.string(), ": ", ec.message());
  return ec == std::errc::no_space_on_device ? absl::ResourceExhaustedError(what) : absl::InternalError(what);
}

}  // namespace

absl::StatusOr<PipelineResult> CopyPipeline::Run(const PipelineRequest& request, ProgressSink& progress,
                                                 const CancelToken& cancel) {
  auto label = request.spec.labels().find(kTestCopyLabel);
  if (label == request.spec.labels().end()) {
    if (!engine_) return absl::FailedPreconditionError("no engine pipeline in this worker (copy test mode)");
    return engine_->Run(request, progress, cancel);
  }
  absl::StatusOr<int64_t> total_ms = CopyMs(label->second);
  if (!total_ms.ok()) return total_ms.status();
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(request.model_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(it->path().lexically_relative(request.model_dir));
  }
  if (ec) return absl::InternalError(str::Cat("listing ", request.model_dir.string(), ": ", ec.message()));
  const auto step = std::chrono::milliseconds(*total_ms / kSteps);
  for (int i = 1; i <= kSteps; ++i) {
    if (cancel.WaitFor(step))
      return absl::CancelledError(str::Cat("job ", request.job_id, " cancelled at step ", i - 1));
    // The files are spread over the steps, so a disk that fills mid-run fails the step that writes.
    for (size_t f = (i - 1) * files.size() / kSteps; f < i * files.size() / kSteps; ++f) {
      if (absl::Status copied = CopyOne(request.model_dir / files[f], request.output_dir / files[f]); !copied.ok()) {
        return copied;
      }
    }
    quark::v1::Progress p;
    p.set_phase("quantize");
    p.set_layer(i);
    p.set_num_layers(kSteps);
    p.set_fraction(static_cast<double>(i) / kSteps);
    p.set_message(str::Cat("copy test mode: step ", i, "/", kSteps));
    progress.Report(p);
  }
  PipelineResult result;
  result.metrics["copied_files"] = static_cast<double>(files.size());
  return result;
}

}  // namespace quark::worker
