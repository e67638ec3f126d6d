// The tiny synthetic gpt-oss the gpt-oss tests share (runtime, quantize): `quark make-model --arch gpt_oss --shape tiny
// --dtype f32 --seed SEED` in a temporary folder removed with the object, its config read back from the config.json
// written, and its weights opened. A failure is a test failure (ADD_FAILURE) naming it.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/runtime/synthetic_model.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime::testing {

// `quark make-model --arch gpt_oss --shape tiny --dtype f32 --seed SEED` in a temporary folder removed after.
struct TinyGptOss {
  TinyGptOss(const std::string& name, uint64_t seed)
      : dir(std::filesystem::temp_directory_path() / ("quark_gpt_oss_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir);
    SyntheticModelOptions options;
    options.arch = "gpt_oss";
    options.shape = "tiny";
    options.dtype = "f32";
    options.seed = seed;
    options.out_dir = dir.string();
    if (auto status = MakeSyntheticModel(options); !status.ok()) ADD_FAILURE() << status;
    std::ifstream in(dir / "config.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto parsed = checkpoint::ParseGptOssConfig(text);
    if (!parsed.ok()) ADD_FAILURE() << parsed.status();
    if (parsed.ok()) config = *parsed;
    auto reader = checkpoint::CheckpointReader::Open(dir.string());
    if (!reader.ok()) ADD_FAILURE() << reader.status();
    if (reader.ok()) weights = std::make_shared<CheckpointWeightSource>(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
  }
  ~TinyGptOss() { std::filesystem::remove_all(dir); }
  TinyGptOss(const TinyGptOss&) = delete;
  TinyGptOss& operator=(const TinyGptOss&) = delete;

  std::filesystem::path dir;
  checkpoint::GptOssConfig config;
  std::shared_ptr<CheckpointWeightSource> weights;
};

}  // namespace quark::runtime::testing
