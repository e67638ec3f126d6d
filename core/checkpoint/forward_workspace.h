// What one sample's forward through a decoder layer holds at its widest, from the model's shape alone (and, when a
// pass trains through the layer, what autograd keeps of it): the workspace term of the device budget
// (runtime/layer_streamer.h, StreamerOptions::device_memory_budget) and of the estimator's peaks
// (estimate/job_estimate.cc). Here, without LibTorch, so that both count the same bytes.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/checkpoint/model_config.h"

namespace quark::checkpoint {

/// runtime::CausalAttention's score blocks hold at most this many float32 elements (32 MiB). Small blocks are faster,
/// not only smaller: a Llama-2-7B layer's forward on 2,048 tokens took 9.1 s (float32) and 4.5 s (bfloat16) with
/// 128 MiB chunks of whole heads, 6.7 s and 1.9 s with these blocks (docs/results/engine.md, "Causal attention in
/// blocks of query rows").
inline constexpr int64_t kScoreElementsPerBlock = int64_t{8} << 20;

/// How CausalAttention cuts the scores of q [batch, heads, seq, D] with `kv_heads` KV heads into blocks: `kv_heads` KV
/// heads (their query heads side by side) and `rows` query positions at a time; a block's scores are
/// [batch, kv_heads, rep * rows, keys] with keys <= seq (the causal mask hides every key after the block's last row).
struct ScoreBlock {
  int64_t kv_heads = 1;
  int64_t rows = 1;
};

/// Every KV head and as many rows as fit kScoreElementsPerBlock; when not even kMinRows rows of every head fit,
/// fewer KV heads (never less than one) and the rows that fit them (never less than one).
inline ScoreBlock ScoreBlockOf(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq) {
  constexpr int64_t kMinRows = 64;  // below this a block's products are too thin for the GEMM to run at speed
  const int64_t budget = kScoreElementsPerBlock;
  kv_heads = std::max<int64_t>(1, kv_heads);
  seq = std::max<int64_t>(1, seq);
  const int64_t rep = std::max<int64_t>(1, heads / kv_heads);
  const int64_t per_row = std::max<int64_t>(1, batch * rep * seq);  // one KV head's scores for one query position
  ScoreBlock block;
  block.kv_heads = std::clamp<int64_t>(budget / (per_row * std::min(kMinRows, seq)), 1, kv_heads);
  block.rows = std::clamp<int64_t>(budget / (per_row * block.kv_heads), 1, seq);
  return block;
}

/// The model's KV heads: num_key_value_heads, or every attention head where the config leaves it unset (0).
inline int64_t KvHeadsOf(const ModelConfig& config) {
  return config.num_key_value_heads > 0 ? config.num_key_value_heads : config.num_attention_heads;
}

/// The score elements of one block at most, [batch, kv_heads, rep * rows, seq] (the last rows' block reads every key).
inline int64_t ScoreBlockElements(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq) {
  const int64_t rep = heads / std::max<int64_t>(1, kv_heads);
  const ScoreBlock block = ScoreBlockOf(batch, heads, kv_heads, seq);
  return block.kv_heads * block.rows * batch * rep * seq;
}

/// The score elements of every block of one forward together: each block of rows [r0, r1) scores keys [0, r1), so
/// about H * T * (T + rows) / 2 rather than H * T^2 (what autograd keeps when a pass trains through the layer).
inline int64_t CausalScoreElements(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq) {
  const int64_t rows = ScoreBlockOf(batch, heads, kv_heads, seq).rows;
  int64_t elements = 0;
  for (int64_t r0 = 0; r0 < seq; r0 += rows) {
    const int64_t r1 = std::min(seq, r0 + rows);
    elements += (r1 - r0) * r1;
  }
  return batch * heads * elements;
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
///   attention: C * (8 + (e if e != 4)) + 6 * T * width * e   (one score block C in float32 and its softmax, the
///              probabilities in the compute dtype; the normed input, q and k each with its contiguous copy, and v)
///   MLP:       4 * T * intermediate * e + 2 * T * width * e   (gate, up, their product and its quantized copy; the
///              normed input and the residual)
/// (the two are never alive together), plus the LayerContextBytes tables. Checked against what the passes allocate
/// by tests/quantize/pass_memory_test.cc.
inline int64_t ForwardWorkspaceBytes(const ModelConfig& config, int64_t seq, int64_t width, int64_t element_bytes) {
  if (seq <= 0) return 0;
  const int64_t heads = config.num_attention_heads, kv_heads = KvHeadsOf(config);
  const int64_t row = seq * width * element_bytes;
  const int64_t scores = ScoreBlockElements(1, heads, kv_heads, seq) * (8 + (element_bytes != 4 ? element_bytes : 0));
  const int64_t mlp = 4 * seq * config.intermediate_size * element_bytes + 2 * row;
  return std::max(scores + 6 * row, mlp) + LayerContextBytes(config, seq, element_bytes);
}

/// What autograd keeps of one sample's forward through a decoder layer for the backward, when a pass trains through
/// the layer (AutoRound, whose tuned linears compute in float32), at the backward's start:
///   scores:  S * (4 + (e if e != 4))   every score block's softmax output in float32 and its probabilities in the
///                                      compute dtype (the blocks are all kept, not one at a time; S =
///                                      CausalScoreElements, H * T^2 while one block holds every row)
///   tokens:  T * (10 * width + 5 * intermediate) * 4   the linears' float32 inputs and the tensors between them: the
///            normed inputs, q, k, v and their rotated and contiguous copies, the attention's output, the residual's
///            norm; gate, up, the activation, their product
/// Measured on the CPU (tests/quantize/pass_memory_test.cc, hidden 256, intermediate 768, 8 heads): beside
/// AutoRound's targets, what a layer held grew 4.35 MiB (float32) and 5.14 MiB (bfloat16) from T = 128 to 256, where
/// this (with the tables) grows 4.84 and 5.58.
inline int64_t TrainingForwardBytes(const ModelConfig& config, int64_t seq, int64_t width, int64_t element_bytes) {
  if (seq <= 0) return 0;
  const int64_t heads = config.num_attention_heads, kv_heads = KvHeadsOf(config);
  const int64_t scores = CausalScoreElements(1, heads, kv_heads, seq) * (4 + (element_bytes != 4 ? element_bytes : 0));
  return scores + seq * (10 * width + 5 * config.intermediate_size) * 4 + LayerContextBytes(config, seq, element_bytes);
}

}  // namespace quark::checkpoint
