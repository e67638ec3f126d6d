// #36 item 3, automatic quantization in quarkd: the pure steps of a search whose sensitivity passes and
// verifications are child jobs. At submit, the model's linear groups with each candidate's size (from its shapes);
// when every pass has ended, the search over their measured sensitivities (core/search's knapsack) and the recipe the
// first verification child quantizes; when a verification ends, its measured loss against the budget, and the
// refined recipe of the next round when it missed. No store, no lock, no LibTorch: JobScheduler calls these under its
// lock (job_scheduler_auto.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/estimate/model_shape.h"
#include "core/search/budget_search.h"
#include "quark/v1/service.pb.h"

namespace quark::server {

/// Whether `job` is an automatic search's parent (spec.auto_search set).
bool IsAutoSearchParent(const quark::v1::Job& job);

/// How many of Job.sweep's first rows are the parent's sensitivity passes (AutoSearchResult.pass_rows, else one per
/// candidate as parents before #36 item 4 had).
int AutoPassRows(const quark::v1::Job& parent);

/// spec.auto_search's budget; INVALID_ARGUMENT naming spec.auto_search when none is set.
absl::StatusOr<search::Budget> AutoSearchBudget(const quark::v1::AutoSearchSpec& spec);

/// The checks of a spec with auto_search that need no model: candidates (empty, unknown with suggestions,
/// repeated: spec.auto_search.candidates[i]; more than 16), the budget (spec.auto_search.target_bits / max_kld /
/// max_ppl_increase: set, finite, positive), max_rounds (0..16), no preset, config, sweep or exclude beside it (every
/// decoder linear is searched and sized), and evaluation.uri (the verification's perplexity).
absl::Status ValidateAutoSearchSpec(const quark::v1::JobSpec& spec);

/// The fields quarkd sets on its own child jobs and a client may not: spec.sensitivity_pass (a search's pass) and
/// spec.sensitivity_first_layer / sensitivity_layer_count (#36 item 4, a split pass). INVALID_ARGUMENT naming them;
/// SubmitJob checks every request (plain jobs, sweeps, automatic searches) with it before anything else.
absl::Status RefuseQuarkdOnlyFields(const quark::v1::JobSpec& spec);

/// The sensitivity child of candidate `scheme`: the parent's spec with preset = scheme, sensitivity_pass set,
/// auto_search cleared, the calibration text the evaluation text when calibration.uri is empty, and no evaluation
/// (a pass evaluates nothing).
quark::v1::JobSpec SensitivityChildSpec(const quark::v1::JobSpec& parent, const std::string& scheme);

/// The parent's groups (name, params, modules, bits per spec candidate) from the model's shapes, and the size range
/// of `kept` (the candidates that were not dropped at submit). A target_bits budget outside that range is
/// INVALID_ARGUMENT naming spec.auto_search.target_bits with the smallest size the candidates reach.
absl::StatusOr<quark::v1::AutoSearchResult> PlanAutoSearch(const estimate::ModelShape& shape,
                                                           const quark::v1::AutoSearchSpec& spec,
                                                           const std::vector<std::string>& kept);

/// A loss budget (spec.auto_search.max_kld / max_ppl_increase) below every recipe, caught at submit when the
/// sensitivity passes are already known: `passes` holds, per spec candidate, the stored pass its child would be
/// deduplicated from (SUCCEEDED, with its figures), or any other state when none is stored or the candidate was dropped
/// at submit. When every candidate in `kept` has a stored pass, the search's own refusal (INVALID_ARGUMENT naming the
/// field with the smallest predicted loss) is returned. OK for a size budget, when a kept candidate's pass is not
/// known (the passes run first and the parent fails after them, as FirstRecipe does), and when the stored figures do
/// not cover the groups (FirstRecipe names that after the passes).
absl::Status CheckLossBudgetOnStoredPasses(const quark::v1::JobSpec& spec, const quark::v1::AutoSearchResult& plan,
                                           const std::vector<std::string>& kept,
                                           const std::vector<quark::v1::Job>& passes);

/// One recipe to verify: its round (job_id empty until the child exists) and the Config its child quantizes.
struct AutoRecipe {
  quark::v1::AutoSearchRound round;
  quark::v1::Config config;
  std::string recipe_json;  // the same Config as Quark's quantization_config JSON
};

/// The first recipe, from the pass children (`passes`: one per spec candidate, in order; only SUCCEEDED ones are
/// searched, each result's metrics "kld:GROUP" / "nll_increase:GROUP" for every group). FAILED_PRECONDITION when no
/// pass succeeded or one lacks a group; the search's refusals (a loss budget below every recipe's predicted loss)
/// pass through.
absl::StatusOr<AutoRecipe> FirstRecipe(const quark::v1::Job& parent, const std::vector<quark::v1::Job>& passes);

/// Fills `round`'s measured loss from its ended verification child and says whether it meets the budget.
bool MeasureRound(const quark::v1::AutoSearchSpec& spec, const quark::v1::Job& child,
                  quark::v1::AutoSearchRound* round);

/// The next round after a measured miss (core/search's RefineRecipe on the last round's choice); nullopt when every
/// group already has its least lossy candidate.
absl::StatusOr<std::optional<AutoRecipe>> RefinedRecipe(const quark::v1::Job& parent,
                                                        const std::vector<quark::v1::Job>& passes);

/// The parent's result when the search ends: the last round's child's artifacts and manifest (the verified export),
/// and metrics rounds, met, bits_per_weight, predicted_/measured_ kld and ppl_increase of the last round.
quark::v1::JobResult AutoSearchJobResult(const quark::v1::AutoSearchResult& result,
                                         const quark::v1::JobResult& last_child);

}  // namespace quark::server
