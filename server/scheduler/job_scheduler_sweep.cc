// #36 sweep jobs in JobScheduler: a parent that runs nothing itself (RUNNING from submission, never queued nor
// leased) and one child job per candidate, ordinary jobs linked by Job.parent_id. The parent's table (Job.sweep)
// is filled from each child as it ends; the parent ends with its last child (sweep_table.h's SweepOutcome).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/job_scheduler.h"
#include "server/scheduler/storage_quota.h"
#include "server/scheduler/sweep_manifest.h"
#include "server/scheduler/time_util.h"

namespace quark::server {

using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;

namespace {

JobEvent LogEvent(const std::string& text, absl::Time now) {
  JobEvent event;
  event.set_log(text);
  *event.mutable_time() = ToTimestamp(now);
  return event;
}

}  // namespace

absl::StatusOr<Job> JobScheduler::SubmitSweep(const std::string& request_id, const quark::v1::JobSpec& spec,
                                              const SubmitOptions& options, const SweepPlan& plan) {
  Answers answers;
  std::string parent_id;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return absl::UnavailableError("quarkd is shutting down");
    if (!request_id.empty()) {  // idempotent as Submit: the parent it first created
      absl::StatusOr<StoredJob> existing = store_->FindByRequestId(options.tenant, request_id);
      if (existing.ok()) return existing->job;
    }
    // The quotas hold for the sweep as a whole: all of its children are created, or none.
    const int64_t children = static_cast<int64_t>(plan.children.size());
    const int64_t queued = tenants_[options.tenant].queued;
    if (options.max_queued_jobs > 0 && queued + children > options.max_queued_jobs) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "tenant ", options.tenant, ": quota max_queued_jobs=", options.max_queued_jobs, ": spec.sweep's ", children,
          " child jobs would make ", queued + children, " jobs queued (", queued, " now)"));
    }
    const absl::Time now = clock_->Now();
    Job parent;
    parent.set_id(NewId("job-"));
    parent.set_request_id(request_id);
    parent.set_tenant(options.tenant);
    parent.set_state(JobState::JOB_STATE_RUNNING);
    *parent.mutable_spec() = spec;
    if (spec.max_attempts() <= 0) parent.mutable_spec()->set_max_attempts(options_.default_max_attempts);
    *parent.mutable_created_at() = ToTimestamp(now);
    *parent.mutable_started_at() = ToTimestamp(now);
    *parent.mutable_sweep() = plan.table;
    if (spec.has_auto_search()) *parent.mutable_auto_search() = plan.auto_search;  // #36 item 3
    int64_t bytes = static_cast<int64_t>(parent.ByteSizeLong());
    for (const SweepChild& child : plan.children) bytes += static_cast<int64_t>(child.spec.ByteSizeLong());
    absl::StatusOr<std::optional<Job>> over_quota = CheckStoredBytesQuota(*store_, options, request_id, bytes);
    if (!over_quota.ok()) return over_quota.status();
    if (over_quota->has_value()) return **over_quota;
    // An automatic search's split passes make more rows than candidates (#36 item 4).
    const int candidates =
        spec.has_auto_search() ? spec.auto_search().candidates_size() : plan.table.candidates_size();
    std::vector<JobEvent> events = {
        StateEventLocked(parent),
        LogEvent(absl::StrCat(spec.has_auto_search() ? "automatic search over " : "sweep of ", candidates,
                              " candidates: ", children, " child jobs"),
                 now)};
    bool created = false;
    absl::StatusOr<StoredJob> stored = store_->CreateJob(parent, &events, &created);
    if (!stored.ok()) return stored.status();
    if (!created) return stored->job;
    parent_id = parent.id();
    ActiveJob& active = active_[parent_id];
    active.order = stored->order;
    active.job = parent;
    for (const JobEvent& event : events) hub_->Publish(event);
    if (metrics_ != nullptr) metrics_->jobs_submitted.WithLabels({PresetLabel(spec)}).Increment();
    CountStateLocked(parent, JobState::JOB_STATE_UNSPECIFIED);
    log::Get("scheduler")->info("job={} sweep of {} candidates model={}", parent_id, spec.sweep_size(),
                                ForLog(spec.model_uri()));
    std::vector<std::string> lines;
    for (const SweepChild& plan_child : plan.children) {
      SubmitOptions child_options = plan_child.options;
      child_options.tenant = options.tenant;
      child_options.max_queued_jobs = 0;  // checked for the whole sweep above
      child_options.max_stored_bytes = 0;
      absl::StatusOr<Job> child = SubmitLocked("", plan_child.spec, child_options, parent_id);
      quark::v1::SweepResult* table = active.job.mutable_sweep();
      quark::v1::SweepCandidate* row = table->mutable_candidates(plan_child.row);
      if (!child.ok()) {
        row->set_state(JobState::JOB_STATE_FAILED);
        row->set_error(absl::StrCat("its child job was not created: ", child.status().ToString()));
        lines.push_back(SweepRowText(*row));
        continue;
      }
      row->set_job_id(child->id());
      row->set_state(child->state());
      if (IsFinal(child->state())) FillSweepRow(*child, table);  // deduplicated from a job that succeeded
      lines.push_back(absl::StrCat(row->scheme(), ": job ", child->id(), " ", StateLabel(child->state()),
                                   child->deduplicated_from().empty()
                                       ? ""
                                       : absl::StrCat(" (deduplicated from ", child->deduplicated_from(), ")")));
    }
    MaybeFinishSweepLocked(parent_id, absl::StrCat("children: ", absl::StrJoin(lines, "; ")));
    DispatchLocked(&answers);
    UpdateGaugesLocked();
  }
  for (auto& answer : answers) answer();
  WriteEndingManifests();  // every child deduplicated from a job that ended: the parent ended at once
  return store_->GetJob(parent_id);
}

bool JobScheduler::MaybeFinishSweepLocked(const std::string& parent_id, const std::string& note) {
  auto it = active_.find(parent_id);
  if (it == active_.end()) return false;
  ActiveJob& active = it->second;
  std::vector<JobEvent> events;
  if (!note.empty()) events.push_back(LogEvent(note, clock_->Now()));
  SaveLocked(active.job, std::move(events)).IgnoreError();  // logged by SaveLocked; the table is saved again below
  if (!SweepFinished(active.job.sweep())) return false;
  if (IsAutoSearchParent(active.job) && !active.cancel_requested) return AdvanceAutoSearchLocked(parent_id);  // #36 item 3
  auto [state, error] = SweepOutcome(active.job.sweep(), active.cancel_requested);
  quark::v1::JobResult result = SweepJobResult(active.job.sweep());
  FinishLocked(parent_id, state, error, &result).IgnoreError();
  return true;
}

std::vector<Job> JobScheduler::SweepChildrenLocked(const Job& parent) {
  std::vector<Job> children;
  for (const quark::v1::SweepCandidate& row : parent.sweep().candidates()) {
    if (row.job_id().empty()) continue;
    if (auto active = active_.find(row.job_id()); active != active_.end()) {
      children.push_back(active->second.job);
      continue;
    }
    absl::StatusOr<Job> child = store_->GetJob(row.job_id());  // a child that ended was stored before it left active_
    if (child.ok()) children.push_back(*std::move(child));
  }
  return children;
}

void JobScheduler::BeginParentEndLocked(std::map<std::string, ActiveJob>::iterator it, JobState from,
                                        bool has_result) {
  EndingParent& ending = ending_parents_[it->first];
  ending.children = SweepChildrenLocked(it->second.job);
  ending.from = from;
  ending.has_result = has_result;
  ending.active = std::move(it->second);
  active_.erase(it);
}

void JobScheduler::WriteEndingManifests() {
  for (;;) {
    std::string parent_id;
    Job parent;
    std::vector<Job> children;
    {
      absl::MutexLock lock(&mu_);
      auto it = std::find_if(ending_parents_.begin(), ending_parents_.end(),
                             [](const auto& entry) { return !entry.second.writing; });
      if (it == ending_parents_.end()) return;
      it->second.writing = true;  // another caller's loop leaves it to this one
      parent_id = it->first;
      parent = it->second.active.job;
      children = it->second.children;
    }
    absl::StatusOr<WrittenManifest> written = options_.sweep_manifests->Write(parent, children);
    absl::MutexLock lock(&mu_);
    auto it = ending_parents_.find(parent_id);
    EndingParent ending = std::move(it->second);
    ending_parents_.erase(it);
    JobEvent event;
    if (!written.ok()) {
      log::Get("scheduler")->warn("job={} parent manifest not written: {}", parent_id,
                                  ForLog(written.status().ToString()));
      event = LogEvent(absl::StrCat("manifest not written: ", written.status().ToString()), clock_->Now());
    } else {
      log::Get("scheduler")->info("job={} parent manifest {} sha256={}", parent_id, ForLog(written->uri),
                                  written->sha256);
      event = LogEvent(absl::StrCat("manifest: ", written->uri, " (sha256 ", written->sha256, ")"), clock_->Now());
    }
    auto active = active_.emplace(parent_id, std::move(ending.active)).first;
    const quark::v1::JobResult* result = ending.has_result ? &active->second.job.result() : nullptr;
    StoreEndLocked(active, ending.from, result, {std::move(event)}).IgnoreError();  // logged by SaveLocked
    UpdateGaugesLocked();
  }
}

void JobScheduler::SweepChildEndedLocked(const Job& child) {
  auto it = active_.find(child.parent_id());
  if (it == active_.end()) return;  // the parent ended already (e.g. failed while quarkd restarted)
  quark::v1::SweepResult* table = it->second.job.mutable_sweep();
  if (!FillSweepRow(child, table)) return;
  for (const quark::v1::SweepCandidate& row : table->candidates()) {
    if (row.job_id() == child.id()) {
      MaybeFinishSweepLocked(child.parent_id(), SweepRowText(row));
      return;
    }
  }
}

absl::StatusOr<Job> JobScheduler::CancelSweepLocked(const std::string& parent_id, Answers* answers) {
  ActiveJob& active = active_[parent_id];
  std::vector<std::string> children;
  for (const quark::v1::SweepCandidate& row : active.job.sweep().candidates()) {
    if (!row.job_id().empty() && active_.count(row.job_id()) > 0) children.push_back(row.job_id());
  }
  if (!active.cancel_requested) {
    active.cancel_requested = true;
    SaveLocked(active.job, {LogEvent(absl::StrCat("cancel requested; cancelling its ", children.size(),
                                                  " active child jobs"),
                                     clock_->Now())})
        .IgnoreError();
    log::Get("scheduler")->info("job={} sweep cancel requested ({} active children)", parent_id, children.size());
  }
  // A queued child ends at once (and may end the parent with it): `active` must not be used past this loop.
  for (const std::string& child_id : children) {
    absl::StatusOr<Job> cancelled = CancelLocked(child_id, answers);
    if (!cancelled.ok()) {
      log::Get("scheduler")->warn("job={} cancelling child {} failed: {}", parent_id, child_id,
                                  ForLog(cancelled.status().ToString()));
    }
  }
  if (active_.count(parent_id) > 0) MaybeFinishSweepLocked(parent_id, "");
  auto it = active_.find(parent_id);
  if (it != active_.end()) return it->second.job;
  return store_->GetJob(parent_id);
}

void JobScheduler::ResyncSweepsLocked() {
  std::vector<std::string> parents;
  for (const auto& [id, active] : active_) {
    if (IsSweepParent(active.job)) parents.push_back(id);
  }
  for (const std::string& parent_id : parents) {
    auto it = active_.find(parent_id);
    if (it == active_.end()) continue;
    quark::v1::SweepResult* table = it->second.job.mutable_sweep();
    for (quark::v1::SweepCandidate& row : *table->mutable_candidates()) {
      if (IsFinal(row.state())) continue;
      if (row.job_id().empty()) {
        row.set_state(JobState::JOB_STATE_FAILED);
        row.set_error("quarkd stopped before this candidate's child job was created");
        continue;
      }
      if (auto child = active_.find(row.job_id()); child != active_.end()) {
        row.set_state(child->second.job.state());
        continue;
      }
      absl::StatusOr<Job> child = store_->GetJob(row.job_id());
      if (!child.ok()) {
        row.set_state(JobState::JOB_STATE_FAILED);
        row.set_error(absl::StrCat("its child job could not be read: ", child.status().ToString()));
        continue;
      }
      FillSweepRow(*child, table);
    }
    MaybeFinishSweepLocked(parent_id, "");
  }
}

}  // namespace quark::server
