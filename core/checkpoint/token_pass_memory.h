// What the passes that keep a layer's calibration activations hold per token beside the streamer's hidden states,
// from the layer's linears alone: the per-token term of the device budget (quantize/pass_memory.h,
// runtime::StreamerOptions::pass_bytes_per_token) and of the estimator's scaling phases (estimate/job_estimate.cc).
// Here, without LibTorch, so that both count the same bytes; tests/quantize/pass_memory_test.cc holds it against the
// tensors the passes allocate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"

namespace quark::checkpoint {

struct TokenPasses {
  /// SmoothQuant, AWQ, AutoSmoothQuant, GPTAQ and Qronos carry the float model's hidden states beside the quantized
  /// model's: the layer's float inputs and outputs.
  bool float_stream = false;
  /// AWQ records the input of every quantized linear for its searches and its clip search (linears that read one
  /// tensor share one copy: algorithms::RecordLinearInputs).
  bool awq = false;
  /// AutoSmoothQuant records one input per pair (those its pairs read first) and quantizes one of them per trial.
  bool autosmoothquant = false;
  /// AutoRound keeps the float layer's output of every sample (its training targets).
  bool autoround = false;
  /// GPTQ of routed experts streamed in groups of this many (QuantizeModelOptions::expert_group_size; 0 = none):
  /// algorithms/gptq_layer.cc keeps the routed block's input of every token and one group's recorded calls.
  int64_t gptq_expert_group = 0;
};

/// Elements per calibration token (times the compute dtype's size for bytes) that `passes` hold for a layer with
/// `linears`, of which `quantized` says which the plan quantizes:
///   float stream:    2 * hidden
///   AWQ and AutoSmoothQuant (one after the other when both run):
///                    the sum of in_features over the distinct inputs the quantized linears read (LinearSpec::input:
///                    q, k and v one input, gate and up another) + hidden (a pair's reference outputs) + 2 * the
///                    widest input (a recorded input concatenated over the samples and its |x|, or one AutoSmoothQuant
///                    trial's quantized inputs)
///   AutoRound:       hidden (its targets; it runs alone, after the scaling algorithms' searches are done)
///   GPTQ of experts in groups of G, in a layer with quantized routed experts:
///                    hidden + min(G, num_experts_per_tok) * the experts' input width (the routed block's inputs,
///                    and one group's calls: a token reaches at most min(G, k) of the group's experts; it runs
///                    alone). The calibration top-up's tokens (moe_min_expert_tokens a group's expert, and as many
///                    candidates of every expert's) are a fixed few per expert, left to the workspace's slack.
/// A routed expert's linear sees the tokens routed to its expert: each kind of expert input (every expert's gate and
/// up read one) counts num_experts_per_tok times.
/// "mlp.experts.7.down_proj" -> "mlp.experts.*.down_proj": one kind of expert linear (every expert's down_proj), and
/// "mlp.experts.7" -> "mlp.experts.*" (what every expert's gate and up read); other names unchanged. The recorded
/// inputs of one kind together cover each token num_experts_per_tok times.
std::string ExpertKind(const std::string& relative_name);

/// AwqOptions::clip_tokens (Quark's n_sample_token): the tokens AWQ's clip search samples.
inline constexpr int64_t kAwqClipTokens = 512;
/// AwqOptions::clip_grid and max_shrink (Quark's _search_best_clip): shrink factors 1 - i / 20 for i < 0.5 x 20.
inline constexpr int kAwqClipGrid = 20;
inline constexpr double kAwqMaxShrink = 0.5;
inline constexpr int kAwqClipShrinks = static_cast<int>(kAwqMaxShrink * kAwqClipGrid);  // 10 factors a block

/// The stride of the tokens AWQ's clip search samples from `tokens` recorded inputs: Quark's input_feat[:, 0::T // n]
/// with n = min(T, clip_tokens). Every stride-th token from the first is used: ceil(T / stride) of them, between
/// clip_tokens and 2 clip_tokens - 1 once T reaches clip_tokens (T = 1,500: every 2nd, 750).
inline int64_t AwqClipTokenStride(int64_t tokens, int64_t clip_tokens = kAwqClipTokens) {
  const int64_t sampled = std::min(tokens, clip_tokens);
  return sampled > 0 && tokens / sampled > 1 ? tokens / sampled : 1;
}

/// How many tokens AWQ's clip search runs over of `tokens` recorded inputs (AwqClipTokenStride).
inline int64_t AwqClipSampledTokens(int64_t tokens, int64_t clip_tokens = kAwqClipTokens) {
  if (tokens <= 0) return 0;
  const int64_t stride = AwqClipTokenStride(tokens, clip_tokens);
  return (tokens + stride - 1) / stride;
}

/// Whether AWQ's clip search takes the linear `name` (Quark's avoid list): not the query and key projections, whose
/// outputs meet in q k^T, which a per-linear output error does not see.
inline bool AwqClipsLinear(const std::string& name) {
  for (const char* avoided : {"q_", "k_", "query", "key", "Wqkv"}) {
    if (name.find(avoided) != std::string::npos) return false;
  }
  return true;
}

/// The most tokens AWQ's clip search samples for any linear that sees at most `tokens` of them (a routed expert sees
/// its share of the layer's): every token up to 2 clip_tokens - 1 (a stride of 1), never more above (a stride k >= 2
/// leaves fewer than clip_tokens (1 + 1 / k)); `tokens` 0 (not known) gives that most.
inline int64_t AwqClipMostSampledTokens(int64_t tokens) {
  const int64_t most = 2 * kAwqClipTokens - 1;
  return tokens > 0 ? std::min(tokens, most) : most;
}

/// AWQ's clip search over a linear [out, in] with groups of `group` input columns holds the float and the clipped
/// outputs of one batch of output channels (Quark's 256, or 64) over its `sampled_tokens` (AwqClipSampledTokens):
/// elements.
inline int64_t AwqClipElements(int64_t out, int64_t in, int64_t group, int64_t sampled_tokens) {
  const int64_t groups = group > 0 && in % group == 0 ? in / group : 1;
  return 2 * groups * sampled_tokens * (out < 256 ? out : 256);
}

/// What AWQ's searches may hold by default to evaluate several trials at once (algorithms/search_batch.h,
/// QuantizeModelOptions::search_batch_bytes), beyond the one-at-a-time search, in the device budget and the
/// estimator's peak: on a device that queues launches (a GPU) 2 GiB; on the CPU 256 MiB, which batches small
/// trials, where LibTorch's per-operation cost dominates (AWQ on tinyllama-a 1.6x faster), and leaves a large
/// model's one at a time (a Llama-2-7B MLP trial over 2048 tokens is ~0.5 GB).
inline constexpr int64_t kGpuSearchBatchBytes = int64_t{2} << 30;
inline constexpr int64_t kCpuSearchBatchBytes = int64_t{256} << 20;

/// AutoRound's float32 copies of each weight it tunes, at the backward's start: its rounding offsets V, their summed
/// gradient and the best iteration's snapshot; what autograd keeps of AutoRoundQdq for the backward (the clamped
/// codes' input, q - zp, the fake-quantized weight) and, in a narrower compute dtype, the weight's float32 copy; one
/// gradient in flight. What a layer held beyond its targets and TrainingForwardBytes (forward_workspace.h) came to
/// 6.1 (float32) and 6.9 (bfloat16) copies of its tuned weights (tests/quantize/pass_memory_test.cc, hidden 256,
/// intermediate 768).
inline constexpr int64_t kAutoRoundWeightCopies = 8;

int64_t TokenPassElements(const std::vector<LinearSpec>& linears, const std::function<bool(const LinearSpec&)>& quantized,
                          const ModelConfig& config, const TokenPasses& passes);

}  // namespace quark::checkpoint
