// #36 sweep jobs: the parent's table of candidates, filled from its children as they end, and how the parent ends.
// Pure functions over the protos (no store, no lock): the scheduler calls them under its lock.
#pragma once

#include <string>
#include <utility>

#include "quark/v1/service.pb.h"

namespace quark::server {

/// `result`'s metric `name`, or `fallback` when it has none.
double MetricOr(const quark::v1::JobResult& result, const std::string& name, double fallback);

/// Whether `job` is a sweep's parent (spec.sweep not empty) or an automatic search's (spec.auto_search, #36 item 3):
/// it is never queued nor leased.
bool IsSweepParent(const quark::v1::Job& job);

/// Copies what the ended (or deduplicated) `child` measured into its row of `table` (the row whose job_id is the
/// child's): its state and error, its artifacts' bytes, ppl (ppl_reloaded, else ppl_after), kld
/// (kld_mean_reloaded), seconds_total, task_scores (per spec.evaluation task, its gated metric on the export read
/// back: <task>_acc_reloaded, else _gguf, else _compressed_tensors); and the float perplexity (ppl_before) and the
/// float task scores (<task>_acc_float) when the table has none yet.
/// Returns false when no row names the child.
bool FillSweepRow(const quark::v1::Job& child, quark::v1::SweepResult* table);

/// Every row final (SUCCEEDED, FAILED, CANCELLED).
bool SweepFinished(const quark::v1::SweepResult& table);

/// How a parent whose rows are all final ends. Cancelled (`cancel_requested`): CANCELLED. At least one candidate
/// succeeded: SUCCEEDED with no error (partial results: the other rows carry their errors). None succeeded:
/// FAILED "every candidate of the sweep failed: SCHEME (job ID): ERROR; ..." naming each child.
std::pair<quark::v1::JobState, std::string> SweepOutcome(const quark::v1::SweepResult& table, bool cancel_requested);

/// The parent's JobResult: metrics candidates, candidates_succeeded, ppl_float, and per succeeded candidate
/// "ppl:SCHEME", "kld:SCHEME", "size_bytes:SCHEME", "bits_per_weight:SCHEME", "task:TASK:SCHEME", and
/// "task:TASK:float" (the table itself is Job.sweep).
quark::v1::JobResult SweepJobResult(const quark::v1::SweepResult& table);

/// One line per row for the parent's event log: "SCHEME (job ID) SUCCEEDED: 1.23e+07 bytes, ppl 8.49, kld 0.01".
std::string SweepRowText(const quark::v1::SweepCandidate& row);

}  // namespace quark::server
