#include "core/search/budget_search.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>

#include "core/base/strings.h"

namespace quark::search {
namespace {

using Table = std::vector<std::vector<double>>;  // [group][candidate]

// Minimise sum(primary) subject to sum(constraint) <= limit, one candidate per group.
struct Knapsack {
  const Table& primary;
  const Table& constraint;
  double limit;

  double Sum(const Table& t, const std::vector<int>& choice) const {
    double s = 0;
    for (size_t g = 0; g < choice.size(); ++g) s += t[g][choice[g]];
    return s;
  }
  bool Fits(double total) const { return total <= limit + 1e-12 * std::max(1.0, std::fabs(limit)); }

  // Per group, argmin of primary + m * constraint (ties: smaller constraint, then smaller primary).
  std::vector<int> Pick(double m) const {
    std::vector<int> choice(primary.size(), 0);
    for (size_t g = 0; g < primary.size(); ++g) {
      for (size_t c = 1; c < primary[g].size(); ++c) {
        const double a = primary[g][c] + m * constraint[g][c];
        const int b = choice[g];
        const double best = primary[g][b] + m * constraint[g][b];
        if (a < best || (a == best && (constraint[g][c] < constraint[g][b] ||
                                       (constraint[g][c] == constraint[g][b] && primary[g][c] < primary[g][b])))) {
          choice[g] = static_cast<int>(c);
        }
      }
    }
    return choice;
  }

  // Single-group changes that lower the primary and keep the constraint, best ratio first, until none is left.
  void Fill(std::vector<int>& choice) const {
    double used = Sum(constraint, choice);
    for (;;) {
      int best_g = -1, best_c = -1;
      double best_ratio = -1;
      for (size_t g = 0; g < choice.size(); ++g) {
        for (size_t c = 0; c < primary[g].size(); ++c) {
          const double gain = primary[g][choice[g]] - primary[g][c];
          const double cost = constraint[g][c] - constraint[g][choice[g]];
          if (gain <= 0 || !Fits(used + cost)) continue;
          const double ratio = cost <= 0 ? std::numeric_limits<double>::infinity() : gain / cost;
          if (ratio > best_ratio) best_ratio = ratio, best_g = static_cast<int>(g), best_c = static_cast<int>(c);
        }
      }
      if (best_g < 0) return;
      used += constraint[best_g][best_c] - constraint[best_g][choice[best_g]];
      choice[best_g] = best_c;
    }
  }

  // Exact dynamic programme over the constraint in kUnits steps of the slack above its minimum (each group's
  // step count rounded up, so its answers always fit).
  std::vector<int> SolveByUnits() const {
    constexpr int64_t kUnits = 50000;
    const size_t groups = primary.size();
    std::vector<double> floor(groups);
    double slack = limit;
    for (size_t g = 0; g < groups; ++g) {
      floor[g] = *std::min_element(constraint[g].begin(), constraint[g].end());
      slack -= floor[g];
    }
    const double unit = std::max(slack, 0.0) / kUnits;
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> best(kUnits + 1, 0.0), next(kUnits + 1);
    std::vector<std::vector<uint8_t>> pick(groups, std::vector<uint8_t>(kUnits + 1, 0));
    for (size_t g = 0; g < groups; ++g) {
      std::fill(next.begin(), next.end(), inf);
      for (size_t c = 0; c < primary[g].size(); ++c) {
        const double extra = constraint[g][c] - floor[g];
        const double steps = unit > 0 ? std::ceil(extra / unit - 1e-9) : (extra > 0 ? kUnits + 1 : 0);
        if (steps > kUnits) continue;
        const int64_t w = static_cast<int64_t>(std::max(steps, 0.0));
        for (int64_t u = w; u <= kUnits; ++u) {
          const double v = best[u - w] + primary[g][c];
          if (v < next[u]) next[u] = v, pick[g][u] = static_cast<uint8_t>(c);
        }
      }
      best.swap(next);
    }
    std::vector<int> choice(groups, 0);
    int64_t u = kUnits;
    for (size_t g = groups; g-- > 0;) {
      const int c = pick[g][u];
      choice[g] = c;
      const double extra = constraint[g][c] - floor[g];
      u -= unit > 0 ? static_cast<int64_t>(std::max(std::ceil(extra / unit - 1e-9), 0.0)) : 0;
    }
    return choice;
  }

  // The better of the exact programme and the Lagrangian relaxation, each filled greedily.
  std::vector<int> Solve() const {
    std::vector<int> relaxed = SolveRelaxed();
    std::vector<int> exact = SolveByUnits();
    Fill(exact);
    if (!Fits(Sum(constraint, exact))) return relaxed;
    return Sum(primary, exact) < Sum(primary, relaxed) ? exact : relaxed;
  }

  std::vector<int> SolveRelaxed() const {
    std::vector<int> choice = Pick(0);
    if (!Fits(Sum(constraint, choice))) {
      double lo = 0, hi = 1;
      while (!Fits(Sum(constraint, Pick(hi))) && hi < 1e300) hi *= 4;
      for (int i = 0; i < 200; ++i) {
        const double mid = lo + (hi - lo) / 2;
        if (Fits(Sum(constraint, Pick(mid)))) {
          hi = mid;
        } else {
          lo = mid;
        }
      }
      choice = Pick(hi);
    }
    Fill(choice);
    return choice;
  }
};

double MinSum(const Table& t) {
  double s = 0;
  for (const auto& row : t) {
    double m = row[0];
    for (double v : row) m = std::min(m, v);
    s += m;
  }
  return s;
}

const Table& LossOf(const SearchSpace& space, BudgetKind kind) {
  return kind == BudgetKind::kMaxPplIncrease ? space.nll_increase : space.kld;
}

}  // namespace

absl::StatusOr<SearchSpace> MakeSearchSpace(const SensitivityTable& table, const std::vector<Candidate>& candidates,
                                            checkpoint::StDType model_dtype, const std::string& field) {
  if (candidates.empty()) return absl::InvalidArgumentError(StrCat(field, ": no candidate schemes given"));
  if (table.groups.empty()) return absl::InvalidArgumentError("sensitivity table: no linear groups");
  SearchSpace s;
  std::vector<int> pass;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const int p = table.FindCandidate(candidates[i].name);
    if (p < 0) {
      return absl::InvalidArgumentError(
          StrCat(field, "[", i, "]: \"", candidates[i].name, "\" was not measured in the sensitivity table"));
    }
    pass.push_back(p);
    s.candidates.push_back(candidates[i].name);
  }
  s.groups = table.groups;
  for (size_t g = 0; g < table.groups.size(); ++g) {
    s.params += table.groups[g].params;
    s.bits.emplace_back();
    s.kld.emplace_back();
    s.nll_increase.emplace_back();
    for (size_t i = 0; i < candidates.size(); ++i) {
      s.bits[g].push_back(GroupBits(table.groups[g], candidates[i].config, model_dtype));
      s.kld[g].push_back(table.passes[pass[i]].kld[g]);
      s.nll_increase[g].push_back(table.passes[pass[i]].nll_increase[g]);
    }
  }
  return s;
}

absl::Status CheckSizeBudget(const std::vector<LinearGroup>& groups, const std::vector<Candidate>& candidates,
                             checkpoint::StDType model_dtype, const Budget& budget) {
  if (budget.kind != BudgetKind::kTargetBits || groups.empty() || candidates.empty()) return absl::OkStatus();
  SearchSpace s;
  s.groups = groups;
  for (const LinearGroup& g : groups) {
    s.params += g.params;
    s.bits.emplace_back();
    for (const Candidate& c : candidates) {
      s.bits.back().push_back(GroupBits(g, c.config, model_dtype));
      if (s.candidates.size() < candidates.size()) s.candidates.push_back(c.name);
    }
  }
  s.kld = s.nll_increase = Table(groups.size(), std::vector<double>(candidates.size(), 0.0));
  return SearchRecipe(s, budget).status();
}

Recipe Evaluate(const SearchSpace& space, std::vector<int> choice) {
  Recipe r;
  double bits = 0;
  for (size_t g = 0; g < choice.size(); ++g) {
    bits += space.bits[g][choice[g]];
    r.predicted_kld += space.kld[g][choice[g]];
    r.predicted_nll_increase += space.nll_increase[g][choice[g]];
  }
  r.bits_per_weight = bits / static_cast<double>(space.params);
  r.choice = std::move(choice);
  return r;
}

absl::StatusOr<Recipe> SearchRecipe(const SearchSpace& space, const Budget& budget) {
  const bool loss_budget = budget.kind != BudgetKind::kTargetBits;
  if (!std::isfinite(budget.value) || budget.value < 0 || (!loss_budget && budget.value == 0)) {
    return absl::InvalidArgumentError(StrCat(budget.field, ": ", budget.value, " is not a ",
                                             loss_budget ? "non-negative" : "positive", " finite number"));
  }
  Table per_weight = space.bits;
  for (auto& row : per_weight) {
    for (double& b : row) b /= static_cast<double>(space.params);
  }
  const Table& loss = LossOf(space, budget.kind);
  const std::string names = StrJoin(space.candidates, ", ");
  if (!loss_budget) {
    const double smallest = MinSum(per_weight);
    if (budget.value < smallest) {
      return absl::InvalidArgumentError(StrCat(budget.field, ": ", budget.value, " bits per weight is below ", smallest,
                                               ", the smallest the candidates (", names, ") reach"));
    }
    return Evaluate(space, Knapsack{loss, per_weight, budget.value}.Solve());
  }
  const double limit = budget.kind == BudgetKind::kMaxPplIncrease ? std::log1p(budget.value) : budget.value;
  const double smallest = MinSum(loss);
  if (limit < smallest) {
    const double shown = budget.kind == BudgetKind::kMaxPplIncrease ? std::expm1(smallest) : smallest;
    return absl::InvalidArgumentError(StrCat(budget.field, ": ", budget.value, " is below ", shown,
                                             ", the smallest predicted loss the candidates (", names, ") reach"));
  }
  return Evaluate(space, Knapsack{per_weight, loss, limit}.Solve());
}

absl::StatusOr<Recipe> RefineRecipe(const SearchSpace& space, const Recipe& recipe, BudgetKind kind) {
  const Table& loss = LossOf(space, kind);
  int worst = -1;
  int target = -1;
  for (size_t g = 0; g < recipe.choice.size(); ++g) {
    const int now = recipe.choice[g];
    // The next larger candidate that predicts less loss.
    int next = -1;
    for (size_t c = 0; c < space.candidates.size(); ++c) {
      if (loss[g][c] >= loss[g][now] || space.bits[g][c] < space.bits[g][now]) continue;
      if (next < 0 || space.bits[g][c] < space.bits[g][next]) next = static_cast<int>(c);
    }
    if (next < 0) continue;
    if (worst < 0 || loss[g][now] > loss[worst][recipe.choice[worst]]) worst = static_cast<int>(g), target = next;
  }
  if (worst < 0) return absl::FailedPreconditionError("refine: every group already has its least lossy candidate");
  std::vector<int> choice = recipe.choice;
  choice[worst] = target;
  return Evaluate(space, std::move(choice));
}

Config RecipeConfig(const SearchSpace& space, const std::vector<Candidate>& candidates, const Recipe& recipe) {
  std::map<int, int64_t> weight;
  for (size_t g = 0; g < recipe.choice.size(); ++g) weight[recipe.choice[g]] += space.groups[g].params;
  int global = recipe.choice.empty() ? 0 : recipe.choice[0];
  for (const auto& [c, w] : weight) {
    if (w > weight[global]) global = c;
  }
  Config config;
  config.global_quant_config = candidates[global].config;
  for (size_t g = 0; g < recipe.choice.size(); ++g) {
    if (recipe.choice[g] == global) continue;
    for (const ModuleInfo& m : space.groups[g].modules) {
      config.layer_quant_config.push_back({m.name, candidates[recipe.choice[g]].config});
    }
  }
  config.exclude = {"lm_head"};
  return config;
}

}  // namespace quark::search
