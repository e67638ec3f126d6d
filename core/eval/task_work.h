// The work ScoreTask (task_scoring.h) does for a task's documents, counted without running the model: the inputs of
// estimate::TaskWork (core/estimate/task_cost.h), which prices them. Counted exactly as the scorer encodes,
// truncates, shares and batches its requests (TaskWorkTest holds it to the scorer's own passes through LayerHooks).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/estimate/task_cost.h"
#include "core/eval/task_docs.h"
#include "core/runtime/tokenizer.h"

namespace quark::eval {

struct TaskWorkOptions {
  int64_t max_length = 2048;                 // the scorer's resolved max_length (TaskResult.max_length)
  int64_t activation_bytes_per_pass = int64_t{256} << 20;  // TaskScoreOptions::activation_bytes_per_pass
  int64_t hidden_bytes_per_token = 0;        // hidden_size x the compute dtype's bytes (ForEachHidden's budget)
};

/// The scorer's work on `docs`. InvalidArgument as the scorer's for a continuation that encodes to nothing.
absl::StatusOr<estimate::TaskWork> CountTaskWork(const std::vector<TaskDoc>& docs, const runtime::Tokenizer& tokenizer,
                                                 const TaskWorkOptions& options);

}  // namespace quark::eval
