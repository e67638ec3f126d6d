#include "server/scheduler/sweep_table.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/eval/evaluation_plan.h"

namespace quark::server {
namespace {

using quark::v1::JobState;

bool IsFinalState(JobState state) {
  return state == JobState::JOB_STATE_SUCCEEDED || state == JobState::JOB_STATE_FAILED ||
         state == JobState::JOB_STATE_CANCELLED;
}

// #36 item 1: each spec.evaluation task's gated score of the export read back (hf_quark first, as the table's ppl),
// and the float model's, from a child's metrics (core/eval's names: arc_easy_acc_reloaded).
void FillTaskScores(const quark::v1::Job& child, quark::v1::SweepCandidate* row, quark::v1::SweepResult* table) {
  const auto& metrics = child.result().metrics();
  for (const std::string& task : child.spec().evaluation().tasks()) {
    const std::string metric = eval::GatedTaskMetric(task);
    for (const char* label : {"reloaded", "gguf", "compressed_tensors"}) {
      auto it = metrics.find(eval::TaskMetricName(task, metric, label));
      if (it == metrics.end()) continue;
      (*row->mutable_task_scores())[task] = it->second;
      break;
    }
    auto float_score = metrics.find(eval::TaskMetricName(task, metric, "float"));
    if (float_score != metrics.end() && table->task_scores_float().count(task) == 0) {
      (*table->mutable_task_scores_float())[task] = float_score->second;
    }
  }
}

}  // namespace

double MetricOr(const quark::v1::JobResult& result, const std::string& name, double fallback) {
  auto it = result.metrics().find(name);
  return it == result.metrics().end() ? fallback : it->second;
}

bool IsSweepParent(const quark::v1::Job& job) { return job.spec().sweep_size() > 0 || job.spec().has_auto_search(); }

bool FillSweepRow(const quark::v1::Job& child, quark::v1::SweepResult* table) {
  for (quark::v1::SweepCandidate& row : *table->mutable_candidates()) {
    if (row.job_id().empty() || row.job_id() != child.id()) continue;
    row.set_state(child.state());
    row.set_error(child.error());
    const quark::v1::JobResult& result = child.result();
    int64_t bytes = 0;
    for (const quark::v1::Artifact& artifact : result.artifacts()) bytes += artifact.size_bytes();
    row.set_size_bytes(bytes);
    row.set_ppl(MetricOr(result, "ppl_reloaded", MetricOr(result, "ppl_after", 0.0)));
    row.set_kld(MetricOr(result, "kld_mean_reloaded", 0.0));
    row.set_seconds(MetricOr(result, "seconds_total", 0.0));
    if (table->ppl_float() == 0.0) table->set_ppl_float(MetricOr(result, "ppl_before", 0.0));
    row.clear_task_scores();
    FillTaskScores(child, &row, table);
    return true;
  }
  return false;
}

bool SweepFinished(const quark::v1::SweepResult& table) {
  for (const quark::v1::SweepCandidate& row : table.candidates()) {
    if (!IsFinalState(row.state())) return false;
  }
  return true;
}

std::pair<JobState, std::string> SweepOutcome(const quark::v1::SweepResult& table, bool cancel_requested) {
  int succeeded = 0;
  std::vector<std::string> failures;
  for (const quark::v1::SweepCandidate& row : table.candidates()) {
    if (row.state() == JobState::JOB_STATE_SUCCEEDED) {
      ++succeeded;
      continue;
    }
    failures.push_back(absl::StrCat(row.scheme(), " (", row.job_id().empty() ? "dropped" : "job " + row.job_id(),
                                    "): ", JobState_Name(row.state()), ": ", row.error()));
  }
  if (cancel_requested) {
    return {JobState::JOB_STATE_CANCELLED,
            absl::StrCat("cancelled: ", succeeded, " of ", table.candidates_size(), " candidates had succeeded")};
  }
  if (succeeded > 0) return {JobState::JOB_STATE_SUCCEEDED, ""};
  return {JobState::JOB_STATE_FAILED,
          absl::StrCat("every candidate of the sweep failed: ", absl::StrJoin(failures, "; "))};
}

quark::v1::JobResult SweepJobResult(const quark::v1::SweepResult& table) {
  quark::v1::JobResult result;
  auto& metrics = *result.mutable_metrics();
  int succeeded = 0;
  for (const quark::v1::SweepCandidate& row : table.candidates()) {
    if (row.state() != JobState::JOB_STATE_SUCCEEDED) continue;
    ++succeeded;
    metrics["ppl:" + row.scheme()] = row.ppl();
    metrics["kld:" + row.scheme()] = row.kld();
    metrics["size_bytes:" + row.scheme()] = static_cast<double>(row.size_bytes());
    metrics["bits_per_weight:" + row.scheme()] = row.bits_per_weight();
    for (const auto& [task, score] : row.task_scores()) metrics["task:" + task + ":" + row.scheme()] = score;
  }
  for (const auto& [task, score] : table.task_scores_float()) metrics["task:" + task + ":float"] = score;
  metrics["candidates"] = table.candidates_size();
  metrics["candidates_succeeded"] = succeeded;
  metrics["ppl_float"] = table.ppl_float();
  return result;
}

std::string SweepRowText(const quark::v1::SweepCandidate& row) {
  std::string head = absl::StrCat(row.scheme(), " (", row.job_id().empty() ? "dropped" : "job " + row.job_id(), ") ",
                                  JobState_Name(row.state()));
  if (row.state() != JobState::JOB_STATE_SUCCEEDED) return absl::StrCat(head, ": ", row.error());
  std::string text = absl::StrCat(head, absl::StrFormat(": %d bytes, %.3f bits/weight, ppl %.6g, kld %.6g",
                                                        row.size_bytes(), row.bits_per_weight(), row.ppl(), row.kld()));
  // The map's order is unspecified: sorted, so the log line is stable.
  std::map<std::string, double> tasks(row.task_scores().begin(), row.task_scores().end());
  for (const auto& [task, score] : tasks) absl::StrAppend(&text, absl::StrFormat(", %s %.4f", task, score));
  return text;
}

}  // namespace quark::server
