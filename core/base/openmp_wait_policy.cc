#include "core/base/openmp_wait_policy.h"

#include <cstdlib>

#include "core/base/self_exec.h"

namespace quark {

bool OpenMpWaitPolicyChosen() {
  return std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr;
}

void EnsurePassiveOpenMpWaits() {
  if (QuarkChoosePassiveOpenMpWaitsBeforeReexecution()) ReexecuteSelf();
}

}  // namespace quark

extern "C" bool QuarkChoosePassiveOpenMpWaitsBeforeReexecution() {
  if (quark::OpenMpWaitPolicyChosen()) return false;
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
  return true;
}
