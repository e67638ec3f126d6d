// A tiny synthetic model of a family with its own config parser (DeepSeek-V3, gpt-oss), shared by that family's tests:
// `quark make-model --arch ARCH --shape SHAPE --dtype f32 --seed SEED` in a temporary folder removed with the object,
// its config read back from the config.json written, and its weights opened. A failure is a test failure
// (ADD_FAILURE) naming it.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/runtime/synthetic_model.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime::testing {

template <typename Config>
struct TinySyntheticModel {
  using Parser = absl::StatusOr<Config> (*)(const std::string& json_text, const std::string& label);
  TinySyntheticModel(const std::string& arch, const std::string& name, uint64_t seed, const std::string& shape, Parser parse)
      : dir(std::filesystem::temp_directory_path() / ("quark_" + arch + "_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir);
    SyntheticModelOptions options;
    options.arch = arch;
    options.shape = shape;
    options.dtype = "f32";
    options.seed = seed;
    options.out_dir = dir.string();
    if (auto status = MakeSyntheticModel(options); !status.ok()) ADD_FAILURE() << status;
    std::ifstream in(dir / "config.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto parsed = parse(text, "config.json");
    if (!parsed.ok()) ADD_FAILURE() << parsed.status();
    if (parsed.ok()) config = *parsed;
    auto reader = checkpoint::CheckpointReader::Open(dir.string());
    if (!reader.ok()) ADD_FAILURE() << reader.status();
    if (reader.ok()) {
      weights = std::make_shared<CheckpointWeightSource>(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
    }
  }
  ~TinySyntheticModel() { std::filesystem::remove_all(dir); }
  TinySyntheticModel(const TinySyntheticModel&) = delete;
  TinySyntheticModel& operator=(const TinySyntheticModel&) = delete;

  std::filesystem::path dir;
  Config config;
  std::shared_ptr<CheckpointWeightSource> weights;
};

}  // namespace quark::runtime::testing
