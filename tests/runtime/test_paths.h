// Where the runtime tests find the shared fixtures.
#pragma once

#include <cstdlib>
#include <string>

#include "core/base/blas_threads.h"
#include "core/engine/engine_init.h"

namespace quark::runtime::testing {

inline std::string SharedDir() {
  const char* dir = std::getenv("QUARK_SHARED_DIR");
  return dir != nullptr ? dir : "/work/shared";
}
inline std::string Stories260K() { return SharedDir() + "/fixtures/stories260K"; }
/// One intra-op thread: the test models are tiny, and CI machines are shared, where spinning OpenMP/OpenBLAS
/// thread pools make small ops slower by orders of magnitude.
inline void InitTestEngine() {
  quark::EngineOptions options;
  options.intra_op_threads = 1;
  quark::InitEngine(options);
  SetBlasThreads(1);
}

inline std::string TinyStoriesText() { return SharedDir() + "/fixtures/eval/tinystories_validation_prefix.txt"; }

}  // namespace quark::runtime::testing
