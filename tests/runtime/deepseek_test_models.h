// The tiny synthetic DeepSeek-V3 the DeepSeek tests share (runtime, quantize, export): `quark make-model --arch
// deepseek_v3 --shape SHAPE --dtype f32 --seed SEED` in a temporary folder removed with the object, its config read
// back from the config.json written, and its weights opened. A failure is a test failure (ADD_FAILURE) naming it.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/runtime/synthetic_model.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime::testing {

struct TinyDeepseek {
  TinyDeepseek(const std::string& name, uint64_t seed, const std::string& shape = "tiny")
      : dir(std::filesystem::temp_directory_path() / ("quark_deepseek_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir);
    SyntheticModelOptions options;
    options.arch = "deepseek_v3";
    options.shape = shape;
    options.dtype = "f32";
    options.seed = seed;
    options.out_dir = dir.string();
    if (auto status = MakeSyntheticModel(options); !status.ok()) ADD_FAILURE() << status;
    std::ifstream in(dir / "config.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto parsed = checkpoint::ParseDeepseekConfig(text);
    if (!parsed.ok()) ADD_FAILURE() << parsed.status();
    if (parsed.ok()) config = *parsed;
    auto reader = checkpoint::CheckpointReader::Open(dir.string());
    if (!reader.ok()) ADD_FAILURE() << reader.status();
    if (reader.ok()) {
      weights = std::make_shared<CheckpointWeightSource>(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
    }
  }
  ~TinyDeepseek() { std::filesystem::remove_all(dir); }
  TinyDeepseek(const TinyDeepseek&) = delete;
  TinyDeepseek& operator=(const TinyDeepseek&) = delete;

  std::filesystem::path dir;
  checkpoint::DeepseekConfig config;
  std::shared_ptr<CheckpointWeightSource> weights;
};

}  // namespace quark::runtime::testing
