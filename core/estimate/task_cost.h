// What scoring lm-eval tasks costs (core/eval/task_scoring.h's ScoreTask, one model): the work counted as the scorer
// does it, and its seconds from a cost model whose coefficients were fitted on the reference machine
// (bench/eval/task_cost.sh measures and fits; bench/eval/task_cost_fit.json holds the fit; docs/results/estimates.md).
//
// The scorer, per task and model:
//   - encodes each request (context, continuation) and keeps (ctx + cont)[-(max_length + 1):][:-1] as the input;
//     requests with the same input tokens (mmlu's four one-token answers) run once: `samples`, `input_tokens`;
//   - streams the model layer by layer over passes of samples whose tokens fit the activation budget (`passes`:
//     every pass reads every layer), each sample alone through each layer (a [1, T] forward: `samples` x layers);
//   - per request, the final norm and the vocabulary projection of its continuation's positions, a double
//     log-softmax over the vocabulary and the argmax (`requests`, `scored_positions`).
// Seconds = passes x weight bytes / disk read rate                                     (the worker's rate)
//         + kTaskCostFit.gemm_scale x decoder FLOPs / GEMM rate     (the worker's rate; the scale: [1, T] products
//                                                                   run at another speed than the probe's square)
//         + kTaskCostFit.sample_layer_s x samples x layers      (a [1, T] layer forward's fixed cost: op dispatch)
//         + kTaskCostFit.request_s x requests                   (a request's fixed cost: encode, logits, softmax)
//         + kTaskCostFit.head_weight_s x requests x hidden x vocab   (the vocabulary projection's weights per request)
//         + kTaskCostFit.logit_s x scored_positions x vocab          (logits, double log-softmax, argmax per position)
//         + kTaskCostFit.decode_weight_s x generated x (decoder params + hidden x vocab) + logit_s x generated x vocab
//                                     (generation, gsm8k: each new token is a one-row forward through every float32
//                                     weight of the model held whole, then its logits and argmax; the prompt's
//                                     prefill counts as a sample)
// Few-shot: k examples before every context lengthen each input by k rendered examples (the fixtures' mean example
// length), capped at max_length; attended pairs grow as sum (T + kS)^2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/estimate/model_shape.h"
#include "core/estimate/throughput.h"

namespace quark::estimate {

/// The scorer's work for one model (summed over tasks). Counts, not sizes: see the header comment for each.
struct TaskWork {
  int64_t requests = 0;
  int64_t samples = 0;
  int64_t input_tokens = 0;
  int64_t scored_positions = 0;
  int64_t attended_pairs = 0;  // sum over samples of input length squared (attention scores per head and layer)
  int64_t passes = 0;
  int64_t generated_tokens = 0;  // generation tasks' decode steps (gsm8k: up to max_gen_toks an example)

  TaskWork& operator+=(const TaskWork& other);
  bool operator==(const TaskWork& other) const;
};

/// Seconds per unit of each fitted term (bench/eval/fit_task_cost.py, least squares on the residual after the
/// FLOP and weight-read terms; the reference machine's figures: docs/results/estimates.md).
struct TaskCostCoefficients {
  double gemm_scale = 0;
  double sample_layer_s = 0;
  double request_s = 0;
  double head_weight_s = 0;
  double logit_s = 0;
  double decode_weight_s = 0;
};
/// bench/eval/task_cost.sh on the reference machine (2-core EPYC, one thread, 2026-11-29): tinyllama-a and the
/// 2-layer Llama-2-7B shape. sample_layer_s came out negative and was dropped (the [1, T] forwards' fixed cost is
/// inside the GEMM term at these sizes); head_weight_s is ~0.59 s a request on a 4096 x 32000 bf16 head.
/// decode_weight_s: bench/runtime/generation_bench's cached decode at one thread, seconds a token over the weights
/// it reads (2-layer Llama-2-7B shape: 1.02 tokens/s over 536 M weights, 1.83e-9; tinyllama-a: 195.5 tokens/s
/// over 3.28 M, 1.56e-9; docs/results/estimates.md).
inline constexpr TaskCostCoefficients kTaskCostFit = {/*gemm_scale=*/0.6672, /*sample_layer_s=*/0,
                                                      /*request_s=*/1.778e-3, /*head_weight_s=*/4.498e-9,
                                                      /*logit_s=*/1.055e-8, /*decode_weight_s=*/1.8e-9};

/// The decoder's FLOPs for `work`: 2 x decoder params x input tokens + 4 x hidden x layers x attended pairs.
double TaskFlops(const ModelShape& model, const TaskWork& work);

/// Seconds to score `work` on `model` at `rates` with `fit`.
double TaskSeconds(const ModelShape& model, const TaskWork& work, const Throughput& rates,
                   const TaskCostCoefficients& fit = kTaskCostFit);

/// lm-eval's few-shot count for task `name` when none is given (mmlu, gsm8k: 5; 0 for the others and unknown
/// names), as core/eval's TaskInfo::default_fewshot (TaskWorkTest holds the two equal).
int64_t DefaultFewshot(const std::string& name);

/// The longest prompt + generation a generation task holds in its KV cache on a model of context `max_length`
/// (gsm8k: the k-shot prompt, cut to max_length - max_gen_toks, and max_gen_toks new tokens); 0 when `names` has
/// no generation task.
int64_t GenerationCacheTokens(const std::vector<std::string>& names, std::optional<int64_t> num_fewshot,
                              int64_t max_length);

/// The work of tasks `names` with lm-eval's --limit `limit` (0 = all; mmlu's per subject) on a model of
/// `hidden_size` with a 32000-entry Llama SentencePiece vocabulary, from the fixtures' statistics (quarkd has neither
/// the task files nor the tokenizer): per example, the requests, distinct inputs, tokens, scored positions and
/// attended pairs as core/eval's CountTaskWork counts them on the whole of ../shared/fixtures/tasks (the first N
/// examples are taken as average ones). Passes: the tokens' float32 hidden states over the scorer's 256 MiB budget
/// (at least one). Unknown names count nothing. `num_fewshot`: examples before each context (nullopt: each task's
/// DefaultFewshot); `max_length`: the model's context, which cuts long inputs (0: no cut). Generation (gsm8k): one
/// sample of its k-shot prompt and max_gen_toks generated tokens an example (an upper bound: generation stops
/// earlier at a stop sequence), one pass (the model is held whole).
TaskWork EstimatedTaskWork(const std::vector<std::string>& names, int64_t limit, int64_t hidden_size,
                           std::optional<int64_t> num_fewshot = 0, int64_t max_length = 0);

}  // namespace quark::estimate
