#include "core/cli/auto_search_options.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>


namespace quark::cli {
namespace {

absl::StatusOr<search::Budget> BudgetOf(const AutoSearchOptions& o, const AutoSearchContext& c) {
  std::vector<search::Budget> given;
  if (o.target_bits) given.push_back({search::BudgetKind::kTargetBits, *o.target_bits, "--target-bits"});
  if (o.max_kld) given.push_back({search::BudgetKind::kMaxKld, *o.max_kld, "--max-kld"});
  if (c.max_ppl_increase) {
    given.push_back({search::BudgetKind::kMaxPplIncrease, *c.max_ppl_increase, "--max-ppl-increase"});
  }
  if (given.size() != 1) {
    return absl::InvalidArgumentError(fmt::format("--auto: give exactly one budget of --target-bits, --max-kld, "
                                                  "--max-ppl-increase ({} given)",
                                                  given.size()));
  }
  return given[0];
}

void PrintRounds(const search::AutoQuantizeResult& r) {
  std::cout << fmt::format("sensitivity: {} groups x {} candidates, {} ({:.1f}s)\n", r.table.groups.size(),
                           r.table.passes.size(), r.table_from_cache ? "from the cache" : "measured",
                           r.sensitivity_seconds);
  for (size_t i = 0; i < r.rounds.size(); ++i) {
    const auto& v = r.rounds[i];
    std::cout << fmt::format("round {}: {:.4f} bits/weight  KLD predicted {:.6f} measured {:.6f}  ppl increase "
                             "predicted {:+.4f}% measured {:+.4f}%\n",
                             i + 1, v.recipe.bits_per_weight, v.recipe.predicted_kld, v.measured.kld,
                             100 * std::expm1(v.recipe.predicted_nll_increase), 100 * std::expm1(v.measured.nll_increase));
  }
  std::map<std::string, int> count;
  for (int c : r.rounds.back().recipe.choice) ++count[r.space.candidates[c]];
  std::cout << "recipe:";
  for (const auto& [name, n] : count) std::cout << " " << name << " x" << n;
  std::cout << " (groups)\n";
}

}  // namespace

void AutoSearchOptions::AddTo(CLI::App& command) {
  command.add_flag("--auto", enabled,
                   "search a mixed recipe per linear group (q/k/v, o, gate/up, down) among --candidates under one "
                   "budget (--target-bits, --max-kld or --max-ppl-increase), verify it by measurement, then quantize "
                   "with it; needs --calib");
  command.add_option("--candidates", candidates, "with --auto: schemes to choose from, e.g. uint4_wo_128,int8,fp8");
  command.add_option("--target-bits", target_bits,
                     "with --auto: average bits per weight of the decoder linears, scales included (least predicted "
                     "KLD within it)");
  command.add_option("--max-kld", max_kld, "with --auto: mean KLD from the float model at most this (smallest size)");
  command.add_option("--sensitivity-cache", cache_dir,
                     "with --auto: folder of sensitivity tables by content key (model, calibration, candidates)");
  command.add_option("--auto-report", report, "with --auto: write the recipe, plan and rounds here as JSON");
  command.add_option("--max-rounds", max_rounds, "with --auto: measurements of a loss budget (refinements + 1)")
      ->check(CLI::PositiveNumber);
}

search::AutoQuantizeOptions EngineSearchOptions(const std::string& candidates, const std::string& cache_dir,
                                                const AutoSearchContext& context) {
  search::AutoQuantizeOptions options;
  options.candidates = search::SplitCandidateList(candidates);
  options.calibration_file = context.calib;
  options.num_samples = context.num_samples;
  options.seq_len = context.seq_len;
  options.seed = context.seed;
  options.cache_dir = cache_dir;
  return options;
}

absl::StatusOr<Config> RunAutoSearch(const AutoSearchOptions& o, const AutoSearchContext& c) {
  if (c.scheme_given) return absl::InvalidArgumentError("--scheme/--config: not with --auto (the recipe is searched)");
  auto budget = BudgetOf(o, c);
  if (!budget.ok()) return budget.status();
  search::AutoQuantizeOptions options = EngineSearchOptions(o.candidates, o.cache_dir, c);
  options.budget = *budget;
  options.max_rounds = o.max_rounds;
  auto result = search::AutoQuantize(c.model, options);
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kInvalidArgument &&
        result.status().message().rfind("calibration_file", 0) == 0) {
      return absl::InvalidArgumentError("--calib: --auto needs calibration data for the sensitivity pass");
    }
    return result.status();
  }
  PrintRounds(*result);
  if (!o.report.empty()) {
    std::ofstream out(o.report);
    out << search::AutoQuantizeJson(*result).dump(1) << "\n";
    if (!out) return absl::InternalError("--auto-report: cannot write " + o.report);
  }
  if (!result->met) {
    return absl::FailedPreconditionError(fmt::format("{}: the measured loss misses {} after {} rounds",
                                                     budget->field, budget->value, result->rounds.size()));
  }
  return result->config;
}

}  // namespace quark::cli
