#include "core/base/openmp_wait_policy.h"

#include <cstdlib>

#include "core/base/self_exec.h"

namespace quark {

void EnsurePassiveOpenMpWaits() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
  ReexecuteSelf();
}

}  // namespace quark
