// #36 sweep jobs in the public API: SubmitJob with spec.sweep plans one child per candidate, each checked as a job
// of its own (PrepareSubmit: URIs, tenant roots, memory fit, content key) and against the model's shapes
// (sweep_plan.h), and submits the parent with them; DeleteJob of a parent takes its children with it.
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

/// Per spec candidate of an automatic search, the succeeded pass its child would be deduplicated from (the same
/// rule as the scheduler's: same tenant and content key, not forced, its result still verified), else an empty job.
std::vector<quark::v1::Job> StoredPasses(JobStore& store, const quark::v1::JobSpec& spec,
                                         const std::vector<SweepChild>& children) {
  std::vector<quark::v1::Job> passes(spec.auto_search().candidates_size());
  for (const SweepChild& child : children) {
    const SubmitOptions& o = child.options;
    if (o.content_key.empty() || child.spec.force() || !o.reuse_succeeded) continue;
    if (child.row < 0 || child.row >= static_cast<int>(passes.size())) continue;
    absl::StatusOr<quark::v1::Job> match = store.FindByContentKey(o.tenant, o.content_key);
    if (match.ok() && match->state() == quark::v1::JOB_STATE_SUCCEEDED) passes[child.row] = *std::move(match);
  }
  return passes;
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
    // A loss budget below every recipe is known before any work only when each pass already ran (stored by content
    // key, so its child would be deduplicated to those figures); otherwise the parent fails after its passes with the
    // same message (FirstRecipe), since the figures do not exist yet.
    const std::vector<quark::v1::Job> stored = StoredPasses(*store_, spec, plan.children);
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
