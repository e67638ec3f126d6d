#include "server/scheduler/auto_search_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/config/proto_convert.h"
#include "core/config/quark_json.h"
#include "core/search/recipe_space.h"
#include "server/scheduler/sweep_table.h"

namespace quark::server {
namespace {

using quark::v1::AutoSearchSpec;
using quark::v1::Job;
using quark::v1::JobState;

constexpr int kMaxAutoCandidates = 16;
constexpr int kMaxAutoRounds = 16;
constexpr int kDefaultAutoRounds = 4;

// The search space over the candidates whose pass succeeded: the parent's groups and sizes, the passes' losses.
struct PassSpace {
  search::SearchSpace space;
  std::vector<search::Candidate> candidates;
};

absl::StatusOr<PassSpace> BuildSpace(const Job& parent, const std::vector<Job>& passes) {
  const AutoSearchSpec& spec = parent.spec().auto_search();
  const quark::v1::AutoSearchResult& plan = parent.auto_search();
  std::vector<std::string> names;
  std::vector<int> columns;  // index into spec.candidates of each searched candidate
  for (int c = 0; c < spec.candidates_size() && c < static_cast<int>(passes.size()); ++c) {
    if (passes[c].state() != JobState::JOB_STATE_SUCCEEDED) continue;
    names.push_back(spec.candidates(c));
    columns.push_back(c);
  }
  if (names.empty()) {
    return absl::FailedPreconditionError("no sensitivity pass succeeded: nothing to search");
  }
  PassSpace out;
  absl::StatusOr<std::vector<search::Candidate>> candidates =
      search::ResolveCandidates(names, "spec.auto_search.candidates");
  if (!candidates.ok()) return candidates.status();
  out.candidates = *std::move(candidates);
  search::SearchSpace& s = out.space;
  s.candidates = names;
  for (const quark::v1::AutoSearchGroup& g : plan.groups()) {
    search::LinearGroup group;
    group.name = g.name();
    group.params = g.params();
    for (const std::string& m : g.modules()) group.modules.push_back({m, "Linear", {}});
    s.groups.push_back(group);
    s.params += g.params();
    std::vector<double> bits, kld, nll;
    for (size_t i = 0; i < columns.size(); ++i) {
      const int c = columns[i];
      if (c >= g.bits_size()) return absl::InternalError(absl::StrCat(g.name(), ": no size for ", names[i]));
      bits.push_back(g.bits(c));
      const quark::v1::JobResult& result = passes[c].result();
      const double k = MetricOr(result, "kld:" + g.name(), NAN);
      const double n = MetricOr(result, "nll_increase:" + g.name(), NAN);
      if (std::isnan(k) || std::isnan(n)) {
        return absl::FailedPreconditionError(absl::StrCat("the sensitivity pass of ", names[i], " (job ",
                                                          passes[c].id(), ") has no figures for group ", g.name()));
      }
      kld.push_back(k);
      nll.push_back(n);
    }
    s.bits.push_back(std::move(bits));
    s.kld.push_back(std::move(kld));
    s.nll_increase.push_back(std::move(nll));
  }
  if (s.groups.empty() || s.params <= 0)
    return absl::FailedPreconditionError("the model has no linear group to search");
  return out;
}

AutoRecipe MakeRecipe(const PassSpace& p, const search::Recipe& recipe) {
  AutoRecipe out;
  out.round.set_bits_per_weight(recipe.bits_per_weight);
  out.round.set_predicted_kld(recipe.predicted_kld);
  out.round.set_predicted_ppl_increase(std::expm1(recipe.predicted_nll_increase));
  for (int c : recipe.choice) out.round.add_choice(p.space.candidates[c]);
  const Config config = search::RecipeConfig(p.space, p.candidates, recipe);
  out.config = ToProto(config);
  out.recipe_json = ConfigToQuarkJson(config).dump();
  return out;
}

}  // namespace

bool IsAutoSearchParent(const Job& job) { return job.spec().has_auto_search(); }

int AutoPassRows(const Job& parent) {
  return parent.auto_search().pass_rows() > 0 ? parent.auto_search().pass_rows()
                                              : parent.spec().auto_search().candidates_size();
}

absl::StatusOr<search::Budget> AutoSearchBudget(const AutoSearchSpec& spec) {
  search::Budget budget;
  switch (spec.budget_case()) {
    case AutoSearchSpec::kTargetBits:
      budget = {search::BudgetKind::kTargetBits, spec.target_bits(), "spec.auto_search.target_bits"};
      break;
    case AutoSearchSpec::kMaxKld:
      budget = {search::BudgetKind::kMaxKld, spec.max_kld(), "spec.auto_search.max_kld"};
      break;
    case AutoSearchSpec::kMaxPplIncrease:
      budget = {search::BudgetKind::kMaxPplIncrease, spec.max_ppl_increase(), "spec.auto_search.max_ppl_increase"};
      break;
    default:
      return absl::InvalidArgumentError("spec.auto_search: give one budget: target_bits, max_kld or max_ppl_increase");
  }
  const bool loss = budget.kind != search::BudgetKind::kTargetBits;
  if (!std::isfinite(budget.value) || budget.value < 0 || (!loss && budget.value == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(budget.field, ": ", budget.value, " is not a ",
                                                   loss ? "non-negative" : "positive", " finite number"));
  }
  return budget;
}

absl::Status ValidateAutoSearchSpec(const quark::v1::JobSpec& spec) {
  const AutoSearchSpec& a = spec.auto_search();
  if (a.candidates_size() > kMaxAutoCandidates) {
    return absl::InvalidArgumentError(absl::StrCat("spec.auto_search.candidates: ", a.candidates_size(),
                                                   " candidates; at most ", kMaxAutoCandidates));
  }
  std::vector<std::string> names(a.candidates().begin(), a.candidates().end());
  if (auto c = search::ResolveCandidates(names, "spec.auto_search.candidates"); !c.ok()) return c.status();
  if (auto b = AutoSearchBudget(a); !b.ok()) return b.status();
  if (a.max_rounds() < 0 || a.max_rounds() > kMaxAutoRounds) {
    return absl::InvalidArgumentError(absl::StrCat("spec.auto_search.max_rounds: ", a.max_rounds(), " not in 0..",
                                                   kMaxAutoRounds, " (0 = ", kDefaultAutoRounds, ")"));
  }
  if (spec.quantization_case() != quark::v1::JobSpec::QUANTIZATION_NOT_SET || spec.sweep_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.sweep_size() > 0                                     ? "spec.sweep"
                     : spec.quantization_case() == quark::v1::JobSpec::kPreset ? "spec.preset"
                                                                               : "spec.config",
                     ": an automatic search chooses the recipe from spec.auto_search.candidates; leave it empty"));
  }
  if (spec.exclude_size() > 0) {
    return absl::InvalidArgumentError(
        "spec.exclude: not with spec.auto_search (every decoder linear is searched and sized; lm_head stays float)");
  }
  if (a.pass_splits() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.auto_search.pass_splits: ", a.pass_splits(), " is negative (0 = quarkd decides)"));
  }
  if (a.pass_splits() > 0 && a.pass_layer_ranges_size() > 0) {
    return absl::InvalidArgumentError(
        "spec.auto_search.pass_layer_ranges: give the ranges or spec.auto_search.pass_splits, not both");
  }
  if (spec.evaluation().uri().empty()) {
    return absl::InvalidArgumentError(
        "spec.evaluation.uri: required with spec.auto_search (the verification measures the recipe's perplexity)");
  }
  return absl::OkStatus();
}

absl::Status RefuseQuarkdOnlyFields(const quark::v1::JobSpec& spec) {
  if (spec.sensitivity_pass()) {
    return absl::InvalidArgumentError("spec.sensitivity_pass: set by quarkd on its own child jobs, not by clients");
  }
  if (spec.sensitivity_first_layer() != 0 || spec.sensitivity_layer_count() != 0) {
    return absl::InvalidArgumentError(
        "spec.sensitivity_first_layer / spec.sensitivity_layer_count: set by quarkd on its own split sensitivity "
        "passes, not by clients (split a search's passes with spec.auto_search.pass_splits or pass_layer_ranges)");
  }
  return absl::OkStatus();
}

quark::v1::JobSpec SensitivityChildSpec(const quark::v1::JobSpec& parent, const std::string& scheme) {
  quark::v1::JobSpec child = parent;
  child.clear_auto_search();
  child.set_preset(scheme);
  child.set_sensitivity_pass(true);
  if (child.calibration().uri().empty()) child.mutable_calibration()->set_uri(parent.evaluation().uri());
  child.clear_evaluation();
  return child;
}

absl::StatusOr<quark::v1::AutoSearchResult> PlanAutoSearch(const estimate::ModelShape& shape,
                                                           const AutoSearchSpec& spec,
                                                           const std::vector<std::string>& kept) {
  std::vector<std::string> names(spec.candidates().begin(), spec.candidates().end());
  absl::StatusOr<std::vector<search::Candidate>> all = search::ResolveCandidates(names, "spec.auto_search.candidates");
  if (!all.ok()) return all.status();
  quark::v1::AutoSearchResult plan;
  const std::vector<search::LinearGroup> groups = search::DecoderLinearGroups(shape.modules);
  int64_t params = 0;
  for (const search::LinearGroup& g : groups) {
    quark::v1::AutoSearchGroup* out = plan.add_groups();
    out->set_name(g.name);
    out->set_params(g.params);
    for (const ModuleInfo& m : g.modules) out->add_modules(m.name);
    for (const search::Candidate& c : *all) out->add_bits(search::GroupBits(g, c.config, shape.model_dtype));
    params += g.params;
  }
  if (params <= 0) {
    return absl::InvalidArgumentError("spec.model_uri: the model has no decoder linear for an automatic search");
  }
  std::vector<search::Candidate> kept_candidates;
  for (const search::Candidate& c : *all) {
    if (std::find(kept.begin(), kept.end(), c.name) != kept.end()) kept_candidates.push_back(c);
  }
  double smallest = 0, largest = 0;
  for (const quark::v1::AutoSearchGroup& g : plan.groups()) {
    double lo = INFINITY, hi = 0;
    for (size_t c = 0; c < all->size(); ++c) {
      if (std::find(kept.begin(), kept.end(), (*all)[c].name) == kept.end()) continue;
      lo = std::min(lo, g.bits(static_cast<int>(c)));
      hi = std::max(hi, g.bits(static_cast<int>(c)));
    }
    smallest += lo;
    largest += hi;
  }
  plan.set_smallest_bits(smallest / static_cast<double>(params));
  plan.set_largest_bits(largest / static_cast<double>(params));
  absl::StatusOr<search::Budget> budget = AutoSearchBudget(spec);
  if (!budget.ok()) return budget.status();
  if (absl::Status s = search::CheckSizeBudget(groups, kept_candidates, shape.model_dtype, *budget); !s.ok()) return s;
  return plan;
}

absl::StatusOr<AutoRecipe> FirstRecipe(const Job& parent, const std::vector<Job>& passes) {
  absl::StatusOr<PassSpace> p = BuildSpace(parent, passes);
  if (!p.ok()) return p.status();
  absl::StatusOr<search::Budget> budget = AutoSearchBudget(parent.spec().auto_search());
  if (!budget.ok()) return budget.status();
  absl::StatusOr<search::Recipe> recipe = search::SearchRecipe(p->space, *budget);
  if (!recipe.ok()) return recipe.status();
  return MakeRecipe(*p, *recipe);
}

absl::Status CheckLossBudgetOnStoredPasses(const quark::v1::JobSpec& spec, const quark::v1::AutoSearchResult& plan,
                                           const std::vector<std::string>& kept, const std::vector<Job>& passes) {
  if (spec.auto_search().budget_case() == AutoSearchSpec::kTargetBits) return absl::OkStatus();  // PlanAutoSearch's
  const int n = spec.auto_search().candidates_size();
  if (static_cast<int>(passes.size()) != n) return absl::OkStatus();
  std::vector<std::string> known;
  for (int c = 0; c < n; ++c) {
    const bool is_kept = std::find(kept.begin(), kept.end(), spec.auto_search().candidates(c)) != kept.end();
    if (!is_kept) continue;
    if (passes[c].state() != JobState::JOB_STATE_SUCCEEDED) return absl::OkStatus();  // found out after the passes
    // The job that ran the pass (a deduplicated one names it), as the scheduler's dedup notes do.
    known.push_back(passes[c].deduplicated_from().empty() ? passes[c].id() : passes[c].deduplicated_from());
  }
  if (known.empty()) return absl::OkStatus();
  Job parent;
  *parent.mutable_spec() = spec;
  *parent.mutable_auto_search() = plan;
  absl::StatusOr<AutoRecipe> first = FirstRecipe(parent, passes);
  if (first.ok() || !absl::IsInvalidArgument(first.status())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(first.status().message(), " (from the sensitivity passes already run: ",
                                                 absl::StrJoin(known, ", "), ")"));
}

bool MeasureRound(const AutoSearchSpec& spec, const Job& child, quark::v1::AutoSearchRound* round) {
  const quark::v1::JobResult& r = child.result();
  const double before = MetricOr(r, "ppl_before", 0.0);
  const double after = MetricOr(r, "ppl_reloaded", MetricOr(r, "ppl_after", 0.0));
  round->set_measured_kld(MetricOr(r, "kld_mean_reloaded", 0.0));
  round->set_measured_ppl_increase(before > 0 ? after / before - 1.0 : 0.0);
  if (child.state() != JobState::JOB_STATE_SUCCEEDED) return false;
  switch (spec.budget_case()) {
    case AutoSearchSpec::kTargetBits:
      return round->bits_per_weight() <= spec.target_bits();
    case AutoSearchSpec::kMaxKld:
      return r.metrics().count("kld_mean_reloaded") > 0 && round->measured_kld() <= spec.max_kld();
    case AutoSearchSpec::kMaxPplIncrease:
      return before > 0 && round->measured_ppl_increase() <= spec.max_ppl_increase();
    default:
      return false;
  }
}

absl::StatusOr<std::optional<AutoRecipe>> RefinedRecipe(const Job& parent, const std::vector<Job>& passes) {
  absl::StatusOr<PassSpace> p = BuildSpace(parent, passes);
  if (!p.ok()) return p.status();
  absl::StatusOr<search::Budget> budget = AutoSearchBudget(parent.spec().auto_search());
  if (!budget.ok()) return budget.status();
  if (parent.auto_search().rounds_size() == 0) return absl::InternalError("refine: no round to refine");
  const quark::v1::AutoSearchRound& last = parent.auto_search().rounds(parent.auto_search().rounds_size() - 1);
  std::vector<int> choice;
  for (const std::string& name : last.choice()) {
    auto it = std::find(p->space.candidates.begin(), p->space.candidates.end(), name);
    if (it == p->space.candidates.end()) return absl::InternalError(absl::StrCat("refine: ", name, " not searched"));
    choice.push_back(static_cast<int>(it - p->space.candidates.begin()));
  }
  absl::StatusOr<search::Recipe> refined =
      search::RefineRecipe(p->space, search::Evaluate(p->space, std::move(choice)), budget->kind);
  if (absl::IsFailedPrecondition(refined.status())) return std::nullopt;
  if (!refined.ok()) return refined.status();
  return MakeRecipe(*p, *refined);
}

quark::v1::JobResult AutoSearchJobResult(const quark::v1::AutoSearchResult& result,
                                         const quark::v1::JobResult& last_child) {
  quark::v1::JobResult out;
  *out.mutable_artifacts() = last_child.artifacts();
  out.set_manifest_uri(last_child.manifest_uri());
  out.set_manifest_sha256(last_child.manifest_sha256());
  auto& m = *out.mutable_metrics();
  m["rounds"] = result.rounds_size();
  m["met"] = result.met() ? 1 : 0;
  if (result.rounds_size() > 0) {
    const quark::v1::AutoSearchRound& last = result.rounds(result.rounds_size() - 1);
    m["bits_per_weight"] = last.bits_per_weight();
    m["predicted_kld"] = last.predicted_kld();
    m["predicted_ppl_increase"] = last.predicted_ppl_increase();
    m["measured_kld"] = last.measured_kld();
    m["measured_ppl_increase"] = last.measured_ppl_increase();
  }
  for (const auto& [name, value] : last_child.metrics()) m.insert({name, value});  // ppl_before, ppl_reloaded, ...
  return out;
}

}  // namespace quark::server
