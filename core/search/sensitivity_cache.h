// Sensitivity tables as JSON, stored under a content key so that a later search on the same model, calibration
// samples and candidates reuses them instead of measuring again.
//
// Key = SHA-256 over: the format version; the model's digest (config.json and every *.safetensors, by content);
// every sample's token ids; every candidate's name and Quark JSON config. The file is <cache_dir>/<key>.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/search/sensitivity_table.h"

namespace quark::search {

/// SHA-256 of the model folder's config.json and *.safetensors files (names and contents, in name order).
/// NOT_FOUND naming the folder when it has no config.json.
absl::StatusOr<std::string> ModelDigest(const std::string& model_dir);

/// The content key of a sensitivity measurement. `samples`: each sample's token ids.
std::string SensitivityKey(const std::string& model_digest, const std::vector<std::vector<int64_t>>& samples,
                           const std::vector<Candidate>& candidates);

nlohmann::ordered_json SensitivityToJson(const SensitivityTable& table);
/// INVALID_ARGUMENT naming the field (`path`.groups[3].params, ...) on a malformed document.
absl::StatusOr<SensitivityTable> SensitivityFromJson(const nlohmann::ordered_json& j, const std::string& path);

/// The cached table of `key`, or nullopt when none is stored; a stored file that does not parse is INTERNAL naming it.
absl::StatusOr<std::optional<SensitivityTable>> LoadCachedSensitivity(const std::string& cache_dir,
                                                                      const std::string& key);
/// Writes <cache_dir>/<table.key>.json atomically (creating the folder). INTERNAL naming the path on failure.
absl::Status StoreSensitivity(const std::string& cache_dir, const SensitivityTable& table);

}  // namespace quark::search
