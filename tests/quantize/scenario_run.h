// Whole quantize runs as the resume and device tests compare them: a preset with algorithms and exports (a
// Scenario), the options of a small run on the synthetic Llama, and an output folder's files as bytes.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/config/presets.h"
#include "core/quantize/quantize_model.h"

namespace quark::testing {

struct Scenario {
  std::string name;
  std::string preset;
  std::vector<AlgoConfig> algos;
  std::vector<std::string> formats;
  ObserverKind weight_observer = ObserverKind::kMinMax;  // #35: the preset's weight observer (imatrix_mse)
  int64_t search_batch_bytes = -1;                       // #27: QuantizeModelOptions::search_batch_bytes
};

inline std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

/// Every file under `dir` (relative path -> bytes).
inline std::map<std::string, std::string> FilesUnder(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      files[std::filesystem::relative(entry.path(), dir).string()] = ReadBytes(entry.path());
    }
  }
  return files;
}

/// Expects `dir` to hold the files of `reference_dir`, byte for byte, and no others; `what` ends the failure message
/// ("differs between the CPU run and the device run").
inline void ExpectSameFiles(const std::string& reference_dir, const std::string& dir, const std::string& what) {
  const auto reference = FilesUnder(reference_dir), files = FilesUnder(dir);
  ASSERT_FALSE(reference.empty()) << reference_dir << " holds no files";
  ASSERT_EQ(files.size(), reference.size()) << dir;
  for (const auto& [name, bytes] : reference) {
    auto it = files.find(name);
    ASSERT_NE(it, files.end()) << name << " is missing from " << dir;
    EXPECT_TRUE(it->second == bytes) << name << " " << what;
  }
}

/// 4 calibration samples of 32 tokens and 2 evaluation windows of 64 from `text`, into `output` (and `checkpoint`).
inline QuantizeModelOptions ScenarioOptions(const Scenario& scenario, const std::string& text, const std::string& output,
                                            const std::string& checkpoint) {
  QuantizeModelOptions o;
  auto config = PresetConfig(scenario.preset);
  EXPECT_TRUE(config.ok()) << config.status();
  if (config.ok()) o.config = *config;
  if (o.config.global_quant_config.weight) o.config.global_quant_config.weight->observer = scenario.weight_observer;
  o.config.algo_config = scenario.algos;
  o.export_formats = scenario.formats;
  o.calibration_file = text;
  o.num_calibration_samples = 4;
  o.seq_len = 32;
  o.eval_text_file = text;
  o.eval_seq_len = 64;
  o.eval_max_windows = 2;
  o.output_dir = output;
  o.checkpoint_dir = checkpoint;
  o.search_batch_bytes = scenario.search_batch_bytes;
  return o;
}

}  // namespace quark::testing
