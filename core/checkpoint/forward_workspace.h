// What one sample's forward through a decoder layer holds at its widest, from the model's shape alone (and, when a
// pass trains through the layer, what autograd keeps of it): the workspace term of the device budget
// (runtime/layer_streamer.h, StreamerOptions::device_memory_budget) and of the estimator's peaks
// (estimate/job_estimate.cc). Here, without LibTorch, so that both count the same bytes.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/checkpoint/model_config.h"

namespace quark::checkpoint {

/// runtime::CausalAttention's score chunks hold about this many float32 elements (128 MiB): long sequences of big
/// models would otherwise hold [H, T, T] scores and their softmax at once.
inline constexpr int64_t kScoreElementsPerChunk = int64_t{32} << 20;

/// The KV heads CausalAttention takes per chunk for q [batch, heads, seq, D] with `kv_heads` KV heads: all when their
/// scores fit kScoreElementsPerChunk, never fewer than one.
inline int64_t ScoreChunkKvHeads(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq) {
  const int64_t rep = heads / std::max<int64_t>(1, kv_heads);
  const int64_t per_kv = std::max<int64_t>(1, batch * rep * seq * seq);
  return std::min(std::max<int64_t>(1, kv_heads), std::max<int64_t>(1, kScoreElementsPerChunk / per_kv));
}

/// The score elements of one chunk, [batch, chunk, rep * seq, seq].
inline int64_t ScoreChunkElements(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq) {
  const int64_t rep = heads / std::max<int64_t>(1, kv_heads);
  return ScoreChunkKvHeads(batch, heads, kv_heads, seq) * batch * rep * seq * seq;
}

/// The tables every layer's forward reads for `seq` tokens, kept for the run (runtime::TransformerModel::Context):
/// the causal mask [T, T] in float32 (and a sliding window's), RoPE's cos and sin [T, head_dim] in the compute dtype
/// (and Gemma 3's local ones).
inline int64_t LayerContextBytes(const ModelConfig& config, int64_t seq, int64_t element_bytes) {
  const int64_t head_dim = config.head_dim > 0 ? config.head_dim
                                               : config.hidden_size / std::max<int64_t>(1, config.num_attention_heads);
  const int64_t masks = config.sliding_window > 0 && config.sliding_window < seq ? 2 : 1;
  const int64_t tables = config.rope_local_base_freq > 0 ? 4 : 2;
  return masks * seq * seq * 4 + tables * seq * head_dim * element_bytes;
}

/// One sample of `seq` tokens, hidden states `width` wide, in a compute dtype of `element_bytes`: the larger of
///   attention: C * (8 + (e if e != 4)) + 6 * T * width * e   (one score chunk C in float32 and its softmax, the
///              probabilities in the compute dtype; the normed input, q and k each with its contiguous copy, and v)
///   MLP:       4 * T * intermediate * e + 2 * T * width * e   (gate, up, their product and its quantized copy; the
///              normed input and the residual)
/// (the two are never alive together), plus the LayerContextBytes tables. Checked against what the passes allocate
/// by tests/quantize/pass_memory_test.cc.
inline int64_t ForwardWorkspaceBytes(const ModelConfig& config, int64_t seq, int64_t width, int64_t element_bytes) {
  if (seq <= 0) return 0;
  const int64_t heads = config.num_attention_heads;
  const int64_t kv_heads = config.num_key_value_heads > 0 ? config.num_key_value_heads : heads;
  const int64_t row = seq * width * element_bytes;
  const int64_t scores = ScoreChunkElements(1, heads, kv_heads, seq) * (8 + (element_bytes != 4 ? element_bytes : 0));
  const int64_t mlp = 4 * seq * config.intermediate_size * element_bytes + 2 * row;
  return std::max(scores + 6 * row, mlp) + LayerContextBytes(config, seq, element_bytes);
}

/// What autograd keeps of one sample's forward through a decoder layer for the backward, when a pass trains through
/// the layer (AutoRound, whose tuned linears compute in float32), at the backward's start:
///   scores:  H * T^2 * (4 + (e if e != 4))   every score chunk's softmax output in float32 and its probabilities in
///                                            the compute dtype (the chunks are all kept, not one at a time)
///   tokens:  T * (10 * width + 5 * intermediate) * 4   the linears' float32 inputs and the tensors between them: the
///            normed inputs, q, k, v and their rotated and contiguous copies, the attention's output, the residual's
///            norm; gate, up, the activation, their product
/// Measured on the CPU (tests/quantize/pass_memory_test.cc, hidden 256, intermediate 768, 8 heads): beside
/// AutoRound's targets, what a layer held grew 4.35 MiB (float32) and 5.14 MiB (bfloat16) from T = 128 to 256, where
/// this (with the tables) grows 4.84 and 5.58.
inline int64_t TrainingForwardBytes(const ModelConfig& config, int64_t seq, int64_t width, int64_t element_bytes) {
  if (seq <= 0) return 0;
  const int64_t scores = config.num_attention_heads * seq * seq * (4 + (element_bytes != 4 ? element_bytes : 0));
  return scores + seq * (10 * width + 5 * config.intermediate_size) * 4 + LayerContextBytes(config, seq, element_bytes);
}

}  // namespace quark::checkpoint
