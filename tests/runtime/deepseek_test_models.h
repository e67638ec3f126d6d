// The tiny synthetic DeepSeek-V3 the DeepSeek tests share (runtime, quantize, export): `quark make-model --arch
// deepseek_v3 --shape SHAPE --dtype f32 --seed SEED` (tiny_synthetic_model.h).
#pragma once

#include <string>

#include "core/checkpoint/deepseek_config.h"
#include "tests/runtime/tiny_synthetic_model.h"

namespace quark::runtime::testing {

struct TinyDeepseek : TinySyntheticModel<checkpoint::DeepseekConfig> {
  TinyDeepseek(const std::string& name, uint64_t seed, const std::string& shape = "tiny")
      : TinySyntheticModel("deepseek_v3", name, seed, shape, &checkpoint::ParseDeepseekConfig) {}
};

}  // namespace quark::runtime::testing
