// A family's tiny test model: `quark make-model --arch ARCH --shape tiny --dtype f32 --seed SEED` with stories260K's
// tokenizer (512 pieces), as the family pipeline tests, the expert streaming tests and the device tests (seed 21) and
// the compressed-tensors tests (seed 30) use it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/test_paths.h"

namespace quark::testing {

inline absl::Status MakeTinyFamilyModel(const std::string& arch, const std::string& out_dir, uint64_t seed = 21) {
  std::filesystem::remove_all(out_dir);
  runtime::SyntheticModelOptions options;
  options.arch = arch;
  options.shape = "tiny";
  options.dtype = "f32";
  options.seed = seed;
  options.out_dir = out_dir;
  options.tokenizer_path = runtime::testing::Stories260K() + "/tokenizer.model";
  return runtime::MakeSyntheticModel(options);
}

}  // namespace quark::testing
