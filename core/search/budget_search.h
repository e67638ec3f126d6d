// The choice of one candidate scheme per linear group under a budget: a multiple-choice knapsack over the measured
// sensitivities, solved twice and the better answer kept: exactly by dynamic programming over the budget in 50,000
// steps (each group's cost rounded up a step, so the answer always fits), and by a Lagrangian relaxation (per group,
// argmin of loss + lambda * bits, lambda bisected to the budget); each followed by a greedy fill of what it leaves
// (the change with the best loss-per-bit that still fits). Predicted loss is additive over groups: the sum of each group's measured KLD (or NLL
// increase) when quantized alone. Sizes are the estimator's HF-quark bits (recipe_space.h GroupBits).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"
#include "core/config/quant_spec.h"
#include "core/search/sensitivity_table.h"

namespace quark::search {

enum class BudgetKind {
  kTargetBits,      // average bits per weight of the searched linears, scales included: minimise predicted KLD
  kMaxKld,          // predicted mean KLD at most this: minimise size
  kMaxPplIncrease,  // predicted perplexity ratio - 1 at most this (NLL increase <= ln(1 + x)): minimise size
};

struct Budget {
  BudgetKind kind = BudgetKind::kTargetBits;
  double value = 0;
  std::string field = "--target-bits";  // named in errors
};

/// Per group and candidate: bits and the two measured losses ([group][candidate]).
struct SearchSpace {
  std::vector<std::string> candidates;
  std::vector<LinearGroup> groups;
  std::vector<std::vector<double>> bits;
  std::vector<std::vector<double>> kld;
  std::vector<std::vector<double>> nll_increase;
  int64_t params = 0;  // weights of all groups
};

/// The search space of `table` for `candidates` (each must have a pass in the table: else INVALID_ARGUMENT naming
/// `field` and the candidate).
absl::StatusOr<SearchSpace> MakeSearchSpace(const SensitivityTable& table, const std::vector<Candidate>& candidates,
                                            checkpoint::StDType model_dtype, const std::string& field);

/// Before any measurement: a size budget (kTargetBits) that no choice of `candidates` reaches on `groups` is
/// SearchRecipe's INVALID_ARGUMENT; loss budgets need the table and pass here.
absl::Status CheckSizeBudget(const std::vector<LinearGroup>& groups, const std::vector<Candidate>& candidates,
                             checkpoint::StDType model_dtype, const Budget& budget);

struct Recipe {
  std::vector<int> choice;  // per group: index into SearchSpace::candidates
  double bits_per_weight = 0;
  double predicted_kld = 0;
  double predicted_nll_increase = 0;
};

/// The recipe's totals from its choices.
Recipe Evaluate(const SearchSpace& space, std::vector<int> choice);

/// INVALID_ARGUMENT naming budget.field: a value that is not finite and positive (non-negative for losses), or a
/// budget no choice can meet, with the smallest achievable value in the message.
absl::StatusOr<Recipe> SearchRecipe(const SearchSpace& space, const Budget& budget);

/// One refinement step after a measured miss: the group with the largest predicted loss moves to the candidate with
/// the next larger size that predicts less loss (KLD, or the NLL increase for kMaxPplIncrease). FAILED_PRECONDITION when every group already has its best candidate.
absl::StatusOr<Recipe> RefineRecipe(const SearchSpace& space, const Recipe& recipe, BudgetKind kind);

/// The recipe as a Quark Config: the most chosen candidate as global_quant_config, every other group's linears as
/// layer_quant_config entries (their full names), lm_head excluded (as every preset).
Config RecipeConfig(const SearchSpace& space, const std::vector<Candidate>& candidates, const Recipe& recipe);

}  // namespace quark::search
