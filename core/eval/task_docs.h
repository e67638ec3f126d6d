// The tasks `quark eval --tasks` scores, read from ../shared/fixtures/tasks and turned into lm-evaluation-harness's
// requests (lm_eval/tasks/*: doc_to_text, doc_to_choice, doc_to_target, target_delimiter " "):
//   arc_easy, arc_challenge  "Question: {question}\nAnswer:" + " {choice}"           acc, acc_norm
//   piqa                     "Question: {goal}\nAnswer:" + " {sol1|sol2}"           acc, acc_norm
//   winogrande               sentence up to "_" + option (partial scoring: the contexts vary) + " {rest}"   acc
//   mmlu                     "The following are multiple choice questions (with answers) about {subject}.\n\n"
//                            "{question}\nA. ..\nB. ..\nC. ..\nD. ..\nAnswer:" + " {A|B|C|D}"   acc (57 subjects)
//   lambada_openai           text without its last word + " {last word}"            acc (greedy), perplexity
//   gsm8k                    "Question: {question}\nAnswer:", generated greedily     exact_match (strict-match,
//                            until "Question:", "</s>", "<|im_end|>" (gsm8k.h)      flexible-extract)
// Few-shot (fewshot.h) puts `description`, then each example's `example` + "\n\n", before a request's context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::eval {

/// One log-likelihood request: log P(continuation | context).
struct TaskRequest {
  std::string context;
  std::string continuation;
};

/// One example: a request per choice (multiple choice) or one request (lambada).
struct TaskDoc {
  std::string id;  // the split's id or "file:line"
  std::vector<TaskRequest> requests;
  std::vector<std::string> choices;  // lm-eval's doc_to_choice strings (acc_norm divides by their length)
  int64_t gold = 0;
  /// lm-eval's description (mmlu's "The following are ..."); every request's context starts with it.
  std::string description;
  /// The doc as a labeled few-shot example: doc_to_text + target_delimiter + its target.
  std::string example;
  /// The doc's own few-shot pool within the task: mmlu's subject ("" for the others).
  std::string group;
};

struct TaskInfo {
  std::string name;
  bool multiple_choice = true;  // false: a single loglikelihood request (lambada)
  bool acc_norm = false;
  int64_t default_fewshot = 0;  // lm-eval's (mmlu, gsm8k: 5)
  bool generate = false;        // generate_until (gsm8k): requests[0] holds the context and the reference answer
  bool first_n_fewshot = false;  // lm-eval's first_n sampler (mmlu) instead of its seeded random one
};

/// The tasks known, in order.
const std::vector<TaskInfo>& KnownTasks();

/// The task called `name`, or InvalidArgument listing the known ones.
absl::StatusOr<TaskInfo> FindTask(const std::string& name);

/// The first `limit` examples (0 = all; for mmlu, per subject as lm-eval's --limit) of task `name` from `tasks_dir`.
/// InvalidArgument naming the file, the line and the field when a row does not parse; NotFound for a missing file.
absl::StatusOr<std::vector<TaskDoc>> LoadTaskDocs(const std::string& name, const std::string& tasks_dir, int64_t limit);

}  // namespace quark::eval
