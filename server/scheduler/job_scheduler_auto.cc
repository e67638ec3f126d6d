// #36 item 3, automatic quantization in JobScheduler: a sweep-like parent whose first rows (Job.sweep) are one
// sensitivity pass per candidate and whose later rows are verification rounds. When every row is final the parent
// advances here: after the passes, the search (auto_search_plan.h) and the first round's child; after a round, its
// measured loss against the budget, then the parent ends (met, or rounds spent) or a refined round is submitted.
// Cancel, delete and restart are the sweep's (job_scheduler_sweep.cc): they walk the same rows.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/auto_search_plan.h"
#include "server/scheduler/job_scheduler.h"
#include "server/scheduler/pass_ranges.h"
#include "server/scheduler/sweep_table.h"
#include "server/scheduler/time_util.h"

namespace quark::server {

using quark::v1::Job;
using quark::v1::JobState;

namespace {

constexpr int kDefaultRounds = 4;

std::string RoundText(const quark::v1::AutoSearchRound& r) {
  return absl::StrFormat("%.4f bits per weight, predicted KLD %.6g, predicted ppl increase %+.4f%%",
                         r.bits_per_weight(), r.predicted_kld(), 100 * r.predicted_ppl_increase());
}

}  // namespace

std::vector<Job> JobScheduler::AutoPassesLocked(const Job& parent) {
  // #36 item 4: a candidate's pass may be split by layer range over several rows; they merge into one pass here.
  std::vector<Job> passes;
  const int rows = std::min(AutoPassRows(parent), parent.sweep().candidates_size());
  for (const std::string& candidate : parent.spec().auto_search().candidates()) {
    std::vector<Job> parts;
    for (int i = 0; i < rows; ++i) {
      const quark::v1::SweepCandidate& row = parent.sweep().candidates(i);
      if (row.scheme() != candidate) continue;
      Job part;
      part.set_id(row.job_id());
      part.set_state(JobState::JOB_STATE_FAILED);
      part.set_error(row.error());
      part.mutable_spec()->set_sensitivity_first_layer(row.first_layer());
      part.mutable_spec()->set_sensitivity_layer_count(row.layer_count());
      if (!row.job_id().empty()) {
        absl::StatusOr<Job> stored = store_->GetJob(row.job_id());
        if (stored.ok()) part = *std::move(stored);
      }
      parts.push_back(std::move(part));
    }
    passes.push_back(MergeSplitPasses(parts));
  }
  return passes;
}

bool JobScheduler::AdvanceAutoSearchLocked(const std::string& parent_id) {
  // A round deduplicated from a job that already ended is final at once: then the next step follows directly.
  for (;;) {
    auto it = active_.find(parent_id);
    if (it == active_.end()) return true;
    const std::vector<Job> passes = AutoPassesLocked(it->second.job);
    std::optional<AutoRecipe> next = NextAutoRecipeLocked(parent_id, passes);
    if (!next.has_value()) return true;  // the parent ended
    int64_t needs_host_bytes = 0;        // the passes' estimated peak, the largest
    for (const Job& pass : passes) needs_host_bytes = std::max(needs_host_bytes, pass.needs_host_memory_bytes());
    if (!SubmitAutoRoundLocked(parent_id, *std::move(next), needs_host_bytes)) return active_.count(parent_id) == 0;
  }
}

std::optional<AutoRecipe> JobScheduler::NextAutoRecipeLocked(const std::string& parent_id,
                                                             const std::vector<Job>& passes) {
  Job& parent = active_[parent_id].job;
  auto fail = [&](const std::string& why, const quark::v1::JobResult* result) {
    FinishLocked(parent_id, JobState::JOB_STATE_FAILED, absl::StrCat("automatic search: ", why), result)
        .IgnoreError();
    return std::nullopt;
  };
  const quark::v1::AutoSearchSpec& spec = parent.spec().auto_search();
  const int rows = parent.sweep().candidates_size();
  if (rows <= AutoPassRows(parent)) {  // the passes ended: the first search
    absl::StatusOr<AutoRecipe> first = FirstRecipe(parent, passes);
    if (!first.ok()) return fail(std::string(first.status().message()), nullptr);
    return *std::move(first);
  }
  const quark::v1::SweepCandidate& row = parent.sweep().candidates(rows - 1);
  absl::StatusOr<Job> child = store_->GetJob(row.job_id());
  const int n = parent.auto_search().rounds_size();
  if (!child.ok() || child->state() != JobState::JOB_STATE_SUCCEEDED) {
    return fail(absl::StrCat("round ", n, "'s verification job ", row.job_id(), " ", JobState_Name(row.state()), ": ",
                             row.error()),
                nullptr);
  }
  quark::v1::AutoSearchRound* round = parent.mutable_auto_search()->mutable_rounds(n - 1);
  const bool met = MeasureRound(spec, *child, round);
  parent.mutable_auto_search()->set_met(met);
  const quark::v1::JobResult result = AutoSearchJobResult(parent.auto_search(), child->result());
  if (met) {
    FinishLocked(parent_id, JobState::JOB_STATE_SUCCEEDED, "", &result).IgnoreError();
    return std::nullopt;
  }
  const std::string missed = absl::StrCat("the budget was not met after ", n, " rounds (measured KLD ",
                                          round->measured_kld(), ", ppl increase ", round->measured_ppl_increase());
  const int max_rounds = spec.max_rounds() > 0 ? spec.max_rounds() : kDefaultRounds;
  if (n >= max_rounds) return fail(absl::StrCat(missed, "); the last recipe is in auto_search"), &result);
  absl::StatusOr<std::optional<AutoRecipe>> refined = RefinedRecipe(parent, passes);
  if (!refined.ok()) return fail(absl::StrCat(missed, "; refining failed: ", refined.status().message(), ")"), &result);
  if (!refined->has_value()) {
    return fail(absl::StrCat(missed, "; every group already has its least lossy candidate); the last recipe is in "
                                     "auto_search"),
                &result);
  }
  return **std::move(refined);
}

bool JobScheduler::SubmitAutoRoundLocked(const std::string& parent_id, AutoRecipe recipe, int64_t needs_host_bytes) {
  ActiveJob& active = active_[parent_id];
  Job& parent = active.job;
  quark::v1::JobSpec spec = parent.spec();
  spec.clear_auto_search();
  *spec.mutable_config() = recipe.config;
  // A KLD budget is checked on the measured KLD of the export read back.
  if (parent.spec().auto_search().has_max_kld()) spec.mutable_evaluation()->set_kld(true);
  SubmitOptions options;
  options.tenant = parent.tenant();
  options.needs_host_memory_bytes = needs_host_bytes;
  const int number = parent.auto_search().rounds_size() + 1;
  absl::StatusOr<Job> child = SubmitLocked("", spec, options, parent_id);
  // SubmitLocked adds to active_: std::map keeps `active` valid.
  quark::v1::SweepCandidate* row = parent.mutable_sweep()->add_candidates();
  row->set_scheme(absl::StrCat("round ", number));
  if (!child.ok()) {
    row->set_state(JobState::JOB_STATE_FAILED);
    row->set_error(absl::StrCat("its verification job was not created: ", child.status().ToString()));
    FinishLocked(parent_id, JobState::JOB_STATE_FAILED,
                 absl::StrCat("automatic search: round ", number, ": ", row->error()), nullptr)
        .IgnoreError();
    return false;
  }
  recipe.round.set_job_id(child->id());
  *parent.mutable_auto_search()->add_rounds() = recipe.round;
  parent.mutable_auto_search()->set_recipe_json(recipe.recipe_json);
  row->set_job_id(child->id());
  row->set_state(child->state());
  row->set_bits_per_weight(recipe.round.bits_per_weight());
  if (IsFinal(child->state())) FillSweepRow(*child, parent.mutable_sweep());
  quark::v1::JobEvent event;
  event.set_log(absl::StrCat("round ", number, ": ", RoundText(recipe.round), "; verification job ", child->id()));
  *event.mutable_time() = ToTimestamp(clock_->Now());
  SaveLocked(parent, {event}).IgnoreError();
  log::Get("scheduler")
      ->info("job={} automatic search round {}: {} (job {})", parent_id, number, RoundText(recipe.round), child->id());
  return IsFinal(child->state());
}

}  // namespace quark::server
