// lm-evaluation-harness's few-shot contexts (lm_eval/api/samplers.py, api/task.py fewshot_context), for plain-text
// prompts (no chat template, no system instruction):
//   context = description + (example + fewshot_delimiter) for each sampled doc + the doc's own text
// with fewshot_delimiter "\n\n" and each example its doc_to_text + target_delimiter + target (TaskDoc::example).
// The task files hold one split (test, or validation for piqa/winogrande), so the few-shot pool is that split itself
// (lm-eval's fallback when a task has no training or validation docs, and what it does with fewshot_split equal to
// test_split): the doc being evaluated is excluded by drawing k + 1 and dropping the docs equal to it
// (ContextSampler.sample with eval_doc). lm-eval's own defaults draw from train (gsm8k, arc, piqa) or dev (mmlu),
// which are not here: the examples differ from a run on those splits, the rules do not.
//   - default sampler: one random.Random(1234) per task (lm-eval's fewshot_random_seed), shared by the docs in order;
//     each doc draws sample(pool, k + 1);
//   - first_n (mmlu): the pool's first docs, the evaluated one removed; the pool is the doc's subject (its group).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/eval/task_docs.h"

namespace quark::eval {

/// The seed lm-eval's evaluator gives each task's sampler (fewshot_random_seed).
constexpr uint64_t kFewshotSeed = 1234;

/// Indices into `pool` of the few-shot examples of each of `docs` (pool[i] equal to a doc when their `example`
/// strings are equal, as lm-eval compares the docs' dicts). `docs` are the first docs of `pool` (--limit).
std::vector<std::vector<int64_t>> FewshotIndices(const TaskInfo& task, const std::vector<TaskDoc>& docs,
                                                 const std::vector<TaskDoc>& pool, int64_t num_fewshot,
                                                 uint64_t seed = kFewshotSeed);

/// Puts `num_fewshot` examples of `pool` before every request's context of `docs`. InvalidArgument naming
/// --num-fewshot when the pool (of a doc's group) holds fewer than num_fewshot + 1 docs, or num_fewshot < 0.
absl::Status ApplyFewshot(const TaskInfo& task, std::vector<TaskDoc>& docs, const std::vector<TaskDoc>& pool,
                          int64_t num_fewshot, uint64_t seed = kFewshotSeed);

/// LoadTaskDocs(task.name, tasks_dir, limit) with `num_fewshot` examples drawn from the whole task file (-1: the
/// task's default_fewshot), and the count used.
absl::StatusOr<std::vector<TaskDoc>> LoadFewshotTaskDocs(const TaskInfo& task, const std::string& tasks_dir,
                                                         int64_t limit, int64_t& num_fewshot);

}  // namespace quark::eval
