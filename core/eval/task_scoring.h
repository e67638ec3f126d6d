// Scores a task's requests as lm-evaluation-harness's HF causal LM does (lm_eval/api/model.py _encode_pair,
// models/huggingface.py _loglikelihood_tokens), streamed layer by layer:
//   - trailing spaces of the context move to the continuation; whole = encode(context + continuation) and
//     ctx = encode(context), both with BOS (the tokenizer's add_special_tokens default); the continuation's tokens
//     are whole[len(ctx):];
//   - the model reads (ctx + cont)[-(max_length + 1):][:-1] (left-truncated to the context, as lm-eval) and the
//     log-likelihood is the sum of the continuation tokens' log-softmax; is_greedy when each is the argmax;
//   - multiple choice: acc = [argmax ll == gold], acc_norm = [argmax ll / len(choice in characters) == gold];
//     loglikelihood tasks (lambada): acc = is_greedy, perplexity = exp(-mean ll);
//   - stderr of a mean: sample standard deviation / sqrt(n) (lm-eval's mean_stderr).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/eval/task_docs.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/tokenizer.h"

namespace quark::eval {

struct RequestScore {
  double loglikelihood = 0;
  bool is_greedy = false;
  bool truncated = false;  // the context lost tokens on the left to max_length
  std::vector<int64_t> continuation_tokens;
  std::vector<double> token_logprobs;
};

struct ExampleScore {
  std::string id;
  int64_t gold = 0;
  int64_t pred = 0;       // argmax of the log-likelihoods (multiple choice)
  int64_t pred_norm = 0;  // argmax of log-likelihood / characters of the choice
  std::vector<RequestScore> requests;
  /// Generation tasks (gsm8k): the generated text after the stop sequences, its tokens, and each filter's answer.
  std::string generation;
  std::vector<int64_t> generated_tokens;
  std::map<std::string, std::string> filtered;  // "strict-match" -> "18"
};

struct MetricValue {
  double value = 0;
  double stderr_value = 0;
  bool has_stderr = true;  // lambada's perplexity: lm-eval bootstraps it; not done here
};

struct TaskResult {
  std::string task;
  int64_t num_fewshot = 0;
  std::map<std::string, MetricValue> metrics;
  std::vector<ExampleScore> examples;
  int64_t truncated = 0;
  int64_t max_length = 0;
  double seconds = 0;
  int64_t generated_tokens = 0;  // generation tasks: tokens generated in all
};

struct TaskScoreOptions {
  /// The model's context (lm-eval's max_length); 0 = max_position_embeddings (2048 when unset).
  int64_t max_length = 0;
  int64_t activation_bytes_per_pass = int64_t{256} << 20;
  runtime::LayerHooks hooks;
  /// Generation tasks: the bytes the whole model and its KV cache may take (kv_cache_decoder.h); 0 = the machine's
  /// physical memory.
  int64_t memory_budget = 0;
};

/// The continuation's tokens after lm-eval's split of context + continuation. InvalidArgument when the
/// continuation encodes to nothing.
absl::Status EncodeRequest(const runtime::Tokenizer& tokenizer, const TaskRequest& request,
                           std::vector<int64_t>& context_tokens, std::vector<int64_t>& continuation_tokens);

/// Scores every request of `docs` and aggregates the task's metrics; generation tasks (TaskInfo::generate) go to
/// ScoreGenerationTask (generation_task.h).
absl::StatusOr<TaskResult> ScoreTask(const TaskInfo& task, const std::vector<TaskDoc>& docs,
                                     runtime::LayerStreamer& streamer, const runtime::Tokenizer& tokenizer,
                                     const TaskScoreOptions& options = {});

/// lm-eval's metrics of scored examples (ExampleScore.requests filled): acc, acc_norm, perplexity; fills pred.
std::map<std::string, MetricValue> AggregateTask(const TaskInfo& task, const std::vector<TaskDoc>& docs,
                                                 std::vector<ExampleScore>& examples);

/// lm-eval's mean and mean_stderr (sample standard deviation / sqrt(n)).
MetricValue MeanWithStderr(const std::vector<double>& values);

/// Characters (Unicode code points) of UTF-8 text: Python's len(str), which acc_norm divides by.
int64_t Utf8Length(const std::string& text);

}  // namespace quark::eval
