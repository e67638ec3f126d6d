// The estimate tests' look-up of one phase of a job estimate by name.
#pragma once

#include <string>

#include "core/estimate/job_estimate.h"

namespace quark::estimate::testing {

/// The phase named `phase`, or nullptr.
inline const PhaseEstimate* Find(const JobEstimate& e, const std::string& phase) {
  for (const PhaseEstimate& p : e.phases) {
    if (p.phase == phase) return &p;
  }
  return nullptr;
}

}  // namespace quark::estimate::testing
