// The measured sensitivities of a model's linear groups to each candidate scheme (sensitivity.h measures them,
// sensitivity_cache.h stores them under a content key, budget_search.h chooses from them). No LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/search/recipe_space.h"

namespace quark::search {

/// One candidate's pass: per group (in SensitivityTable::groups' order).
struct CandidatePass {
  std::string candidate;
  double seconds = 0;               // wall time of the pass (the float reference included only in the first)
  std::vector<double> kld;          // mean KLD(float || quantized) per scored token, nats
  std::vector<double> nll_increase; // mean NLL(quantized) - mean NLL(float), nats per token
};

struct SensitivityTable {
  std::vector<LinearGroup> groups;
  std::vector<CandidatePass> passes;  // one per candidate, in the candidates' order
  double float_nll = 0;               // mean NLL of the float model per scored token
  int64_t tokens = 0;                 // scored tokens: sum over samples of T - 1
  std::string key;                    // content key (sensitivity_cache.h), set by the caller

  /// Index of a candidate's pass, or -1.
  int FindCandidate(const std::string& name) const {
    for (size_t i = 0; i < passes.size(); ++i) {
      if (passes[i].candidate == name) return static_cast<int>(i);
    }
    return -1;
  }
};

}  // namespace quark::search
