// The tiny synthetic gpt-oss the gpt-oss tests share (runtime, quantize): `quark make-model --arch gpt_oss --shape tiny
// --dtype f32 --seed SEED` (tiny_synthetic_model.h).
#pragma once

#include <string>

#include "core/checkpoint/gpt_oss_config.h"
#include "tests/runtime/tiny_synthetic_model.h"

namespace quark::runtime::testing {

struct TinyGptOss : TinySyntheticModel<checkpoint::GptOssConfig> {
  TinyGptOss(const std::string& name, uint64_t seed)
      : TinySyntheticModel("gpt_oss", name, seed, "tiny", &checkpoint::ParseGptOssConfig) {}
};

}  // namespace quark::runtime::testing
