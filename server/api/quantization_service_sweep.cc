// #36 sweep jobs in the public API: SubmitJob with spec.sweep plans one child per candidate, each checked as a job
// of its own (PrepareSubmit: URIs, tenant roots, memory fit, content key) and against the model's shapes
// (sweep_plan.h), and submits the parent with them; DeleteJob of a parent takes its children with it.
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/log.h"
#include "server/api/model_view.h"
#include "server/api/quantization_service.h"
#include "server/api/sweep_plan.h"
#include "server/log_text.h"
#include "server/scheduler/auto_search_plan.h"
#include "server/scheduler/pass_ranges.h"
#include "server/scheduler/sweep_table.h"

namespace quark::server {
namespace {

/// Every candidate refused: their common refusal as it is when `common` (the same bad URI names its field once),
/// else one naming spec.sweep with each candidate's reason.
absl::Status NoCandidateLeft(const std::vector<std::string>& schemes, const std::vector<absl::Status>& refusals,
                             bool common) {
  bool same = common;
  for (const absl::Status& refusal : refusals) same = same && refusal == refusals.front();
  if (same) return refusals.front();
  std::vector<std::string> reasons;
  for (size_t i = 0; i < schemes.size(); ++i) {
    reasons.push_back(absl::StrCat(schemes[i], ": ", refusals[i].message()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("spec.sweep: no candidate can run on this model: ", absl::StrJoin(reasons, "; ")));
}

/// The model's shapes read through a view pinned inside the tenant's roots; nullopt for an s3:// model or one
/// the server cannot read (the children then find out, as any job does).
std::optional<estimate::ModelShape> ReadShape(const quark::v1::JobSpec& spec, const std::vector<std::string>& roots) {
  const std::string model_dir = UriPolicy::FilePath(spec.model_uri());
  if (model_dir.empty()) return std::nullopt;
  absl::StatusOr<std::unique_ptr<ModelView>> view = ModelView::Open(roots, model_dir);
  if (!view.ok()) return std::nullopt;
  absl::StatusOr<estimate::ModelShape> shape = estimate::ReadModelShape((*view)->path());
  if (!shape.ok()) return std::nullopt;
  return *std::move(shape);
}

/// The succeeded job `child` would be deduplicated from (the same rule as the scheduler's: same tenant and content
/// key, not forced, its result still verified), else an empty job.
quark::v1::Job StoredMatch(JobStore& store, const SweepChild& child) {
  const SubmitOptions& o = child.options;
  if (o.content_key.empty() || child.spec.force() || !o.reuse_succeeded) return {};
  absl::StatusOr<quark::v1::Job> match = store.FindByContentKey(o.tenant, o.content_key);
  if (match.ok() && match->state() == quark::v1::JOB_STATE_SUCCEEDED) return *std::move(match);
  return {};
}

/// Per spec candidate of an automatic search, the stored pass its children would be deduplicated from: its whole
/// pass, or its split passes merged (#36 item 4); a pass not stored (or a dropped candidate) is not SUCCEEDED.
std::vector<quark::v1::Job> StoredPasses(JobStore& store, const quark::v1::JobSpec& spec, const SweepPlan& plan) {
  std::vector<quark::v1::Job> passes;
  for (const std::string& candidate : spec.auto_search().candidates()) {
    std::vector<quark::v1::Job> parts;
    for (const SweepChild& child : plan.children) {
      if (plan.table.candidates(child.row).scheme() == candidate) parts.push_back(StoredMatch(store, child));
    }
    passes.push_back(MergeSplitPasses(parts));
  }
  return passes;
}

/// #36 item 4: each kept candidate's pass split into one child per layer range (PassLayerRanges: the spec's ranges
/// or quarkd's policy over the live workers), each checked and keyed by `prepare` as any job; a candidate whose whole
/// pass is stored keeps its one row and reuses it. The table's pass rows are rebuilt in candidate order.
absl::StatusOr<SweepPlan> SplitPasses(JobStore& store, const quark::v1::JobSpec& spec,
                                      const estimate::ModelShape& shape, SweepPlan plan, size_t live_workers,
                                      const std::function<absl::StatusOr<SubmitOptions>(
                                          const quark::v1::SubmitJobRequest&)>& prepare) {
  absl::StatusOr<std::vector<quark::v1::LayerRange>> ranges =
      PassLayerRanges(spec.auto_search(), shape.num_layers, static_cast<int>(live_workers),
                      static_cast<int>(plan.children.size()));
  if (!ranges.ok()) return ranges.status();
  SweepPlan out;
  out.auto_search = std::move(plan.auto_search);
  std::vector<std::string> splits;
  for (int row = 0; row < plan.table.candidates_size(); ++row) {
    const quark::v1::SweepCandidate& whole_row = plan.table.candidates(row);
    auto child = std::find_if(plan.children.begin(), plan.children.end(),
                              [row](const SweepChild& c) { return c.row == row; });
    // Dropped at submit, unsplit, or its whole pass already stored (reused as it is, not measured again by ranges).
    if (child == plan.children.end() || ranges->size() <= 1 || StoredMatch(store, *child).id() != "") {
      if (child != plan.children.end()) {
        out.children.push_back({out.table.candidates_size(), child->spec, child->options});
      }
      *out.table.add_candidates() = whole_row;
      continue;
    }
    for (const quark::v1::LayerRange& range : *ranges) {
      quark::v1::SubmitJobRequest part;
      *part.mutable_spec() = SplitPassSpec(child->spec, range);
      absl::StatusOr<SubmitOptions> options = prepare(part);
      if (!options.ok()) return options.status();
      quark::v1::SweepCandidate* part_row = out.table.add_candidates();
      *part_row = whole_row;
      part_row->set_first_layer(range.first());
      part_row->set_layer_count(range.count());
      out.children.push_back({out.table.candidates_size() - 1, part.spec(), *std::move(options)});
    }
    splits.push_back(whole_row.scheme());
  }
  out.auto_search.set_pass_rows(out.table.candidates_size());
  if (!splits.empty()) {
    std::vector<std::string> texts;
    for (const quark::v1::LayerRange& r : *ranges) texts.push_back(LayerRangeText(r.first(), r.count()));
    log::Get("server")->info("job=- automatic search: the passes of {} split into {} ({} live workers)",
                             absl::StrJoin(splits, ","), absl::StrJoin(texts, ", "), live_workers);
  }
  return out;
}

}  // namespace

absl::StatusOr<quark::v1::Job> QuantizationServiceImpl::SubmitSweep(const grpc::CallbackServerContext& context,
                                                                    const Principal& principal,
                                                                    const quark::v1::SubmitJobRequest& request,
                                                                    const std::vector<WorkerProfile>& live) {
  const quark::v1::JobSpec& spec = request.spec();
  auto refuse = [&](const absl::Status& status) {
    log::Get("server")->info("job=- SubmitJob (sweep) refused: {}", ForLog(status.ToString()));
    access_->Audit(principal, "submit", "", status, "");
    return status;
  };
  // #36 item 3: an automatic search's rows are its sensitivity passes, planned as a sweep's children.
  const bool automatic = spec.has_auto_search();
  if (absl::Status status = automatic ? ValidateAutoSearchSpec(spec) : ValidateSweepSpec(spec); !status.ok()) {
    return refuse(status);
  }
  const auto& schemes = automatic ? spec.auto_search().candidates() : spec.sweep();
  SweepPlan plan;
  std::vector<std::string> refused_schemes;
  std::vector<absl::Status> refusals;
  for (int i = 0; i < schemes.size(); ++i) {
    quark::v1::SweepCandidate* row = plan.table.add_candidates();
    row->set_scheme(schemes.Get(i));
    quark::v1::SubmitJobRequest child_request;
    *child_request.mutable_spec() =
        automatic ? SensitivityChildSpec(spec, schemes.Get(i)) : SweepChildSpec(spec, schemes.Get(i));
    absl::StatusOr<SubmitOptions> options = PrepareSubmit(principal, child_request, live);
    if (!options.ok()) {
      row->set_state(quark::v1::JOB_STATE_FAILED);
      row->set_error(absl::StrCat("dropped at submit: ", options.status().message()));
      refused_schemes.push_back(spec.sweep(i));
      refusals.push_back(options.status());
      continue;
    }
    plan.children.push_back({i, child_request.spec(), *std::move(options)});
  }
  if (plan.children.empty()) return refuse(NoCandidateLeft(refused_schemes, refusals, true));
  // After PrepareSubmit: the model URI is known to lie in the tenant's roots before its headers are read.
  const std::optional<estimate::ModelShape> shape =
      ReadShape(spec, access_->ModelReadRoots(principal, policy_->roots()));
  if (shape.has_value()) {
    std::vector<SweepChild> fitting;
    for (SweepChild& child : plan.children) {
      CandidateFit fit = FitCandidate(*shape, child.spec);
      quark::v1::SweepCandidate* row = plan.table.mutable_candidates(child.row);
      row->set_bits_per_weight(fit.bits_per_weight);
      if (fit.problem.empty()) {
        fitting.push_back(std::move(child));
        continue;
      }
      row->set_state(quark::v1::JOB_STATE_FAILED);
      row->set_error(absl::StrCat("dropped at submit: the model's shapes do not take it: ", fit.problem));
      refused_schemes.push_back(row->scheme());
      refusals.push_back(absl::InvalidArgumentError(fit.problem));
    }
    plan.children = std::move(fitting);
    if (plan.children.empty()) return refuse(NoCandidateLeft(refused_schemes, refusals, false));
  }
  if (automatic) {
    if (!shape.has_value()) {
      return refuse(absl::InvalidArgumentError(
          "spec.model_uri: an automatic search needs a file:// model quarkd can read (the groups' sizes)"));
    }
    std::vector<std::string> kept;
    for (const SweepChild& child : plan.children) kept.push_back(child.spec.preset());
    absl::StatusOr<quark::v1::AutoSearchResult> groups = PlanAutoSearch(*shape, spec.auto_search(), kept);
    if (!groups.ok()) return refuse(groups.status());
    plan.auto_search = *std::move(groups);
    absl::StatusOr<SweepPlan> split =
        SplitPasses(*store_, spec, *shape, std::move(plan), live.size(),
                    [&](const quark::v1::SubmitJobRequest& part) { return PrepareSubmit(principal, part, live); });
    if (!split.ok()) return refuse(split.status());
    plan = *std::move(split);
    // A loss budget below every recipe is known before any work only when each pass already ran (stored by content
    // key, so its child would be deduplicated to those figures); otherwise the parent fails after its passes with the
    // same message (FirstRecipe), since the figures do not exist yet.
    const std::vector<quark::v1::Job> stored = StoredPasses(*store_, spec, plan);
    if (absl::Status s = CheckLossBudgetOnStoredPasses(spec, plan.auto_search, kept, stored); !s.ok()) {
      return refuse(s);
    }
  }
  // Hashing the model for the children's keys may outlast the caller's deadline: then nothing is created.
  if (absl::Status status = CheckDeadline(&context); !status.ok()) return status;
  absl::StatusOr<quark::v1::Job> parent =
      scheduler_->SubmitSweep(request.request_id(), spec, access_->SubmitOptionsFor(principal), plan);
  access_->Audit(principal, "submit", parent.ok() ? parent->id() : "", parent.status(),
                 absl::StrCat("model=", spec.model_uri(), automatic ? " auto=" : " sweep=", absl::StrJoin(schemes, ","),
                              " output=", spec.output_uri()));
  return parent;
}

absl::StatusOr<int64_t> QuantizationServiceImpl::DeleteSweepChildren(const quark::v1::Job& parent) {
  // A parent still running is refused by the store's own delete (its children are not touched).
  if (!IsSweepParent(parent) || !IsDeletableState(parent.state())) return 0;
  int64_t freed = 0;
  for (const quark::v1::SweepCandidate& row : parent.sweep().candidates()) {
    if (row.job_id().empty()) continue;
    absl::StatusOr<int64_t> child = store_->DeleteJob(row.job_id());
    if (absl::IsNotFound(child.status())) continue;  // deleted on its own before
    if (!child.ok()) {
      return absl::Status(child.status().code(), absl::StrCat("child job ", row.job_id(), " of sweep ", parent.id(),
                                                              ": ", child.status().message()));
    }
    freed += *child;
  }
  return freed;
}

}  // namespace quark::server
