// What the manifest says made the artifact besides the config (#34 item 3): every input file the job read, by URI,
// size and SHA-256 — the model folder's files, the calibration text, the evaluation text, the importance matrix — and
// the build of the engine that read them. quarkd's content key digests the same inputs; the manifest names each, so
// a reader can check one input without recomputing the key.
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"
#include "worker/quantize_pipeline.h"

namespace quark::worker {

/// {"model": {"uri", "files": [{"path", "size_bytes", "sha256"}]}, "calibration": {"uri", "size_bytes", "sha256"},
///  "evaluation": ..., "gguf_imatrix": ...}: only the inputs the job has. Reads the local copies the pipeline read
/// (`request`); errors name the file.
absl::StatusOr<nlohmann::json> ManifestInputs(const quark::v1::JobSpec& spec, const PipelineRequest& request);

/// {"engine_version", "compiler", "build_type"}: the build of this worker's engine.
nlohmann::json ManifestBuild();

}  // namespace quark::worker
