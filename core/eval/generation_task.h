// Scores a generate_until task (gsm8k) as lm-evaluation-harness does: each doc's context (few-shot examples
// included) is continued greedily on the whole model with a KV cache (greedy_generation.h) until the task's stop
// sequences, both filters extract an answer (gsm8k.h) and exact_match compares it with the doc's answer:
//   metrics "exact_match_strict_match" and "exact_match_flexible_extract" (lm-eval's "exact_match,strict-match" and
//   "exact_match,flexible-extract"), mean and mean_stderr.
#pragma once

#include "absl/status/statusor.h"
#include "core/eval/task_scoring.h"

namespace quark::eval {

/// The model must fit options.memory_budget whole (RESOURCE_EXHAUSTED naming the bytes otherwise); docs name
/// themselves in errors.
absl::StatusOr<TaskResult> ScoreGenerationTask(const TaskInfo& task, const std::vector<TaskDoc>& docs,
                                               runtime::LayerStreamer& streamer, const runtime::Tokenizer& tokenizer,
                                               const TaskScoreOptions& options);

/// The machine's physical memory in bytes (the default generation budget).
int64_t PhysicalMemoryBytes();

}  // namespace quark::eval
