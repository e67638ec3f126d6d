#include "core/estimate/rotation_training_cost.h"

namespace quark::estimate {
namespace {

int64_t DecoderParameters(const checkpoint::ModelConfig& m) {
  const int64_t q = m.num_attention_heads * m.head_dim, kv = m.num_key_value_heads * m.head_dim;
  return m.num_hidden_layers * (m.hidden_size * (2 * q + 2 * kv) + 3 * m.hidden_size * m.intermediate_size);
}

}  // namespace

int64_t RotationTrainingBytes(const checkpoint::ModelConfig& m, int64_t seq_len, int64_t batch) {
  const int64_t f = 4;  // float32
  const int64_t tokens = seq_len * batch;
  const int64_t decoder = DecoderParameters(m);
  const int64_t tables = 2 * m.vocab_size * m.hidden_size;  // embed_tokens, lm_head
  const int64_t held = f * (decoder + tables);
  // Per step: each decoder weight rotated and fake-quantized (both kept for the backward), the rotated lm_head.
  const int64_t weight_graph = f * (2 * decoder + m.vocab_size * m.hidden_size);
  const int64_t q = m.num_attention_heads * m.head_dim, kv = m.num_key_value_heads * m.head_dim;
  // Per layer: the residual, norms and quantized inputs (~8 x hidden), q/k/v before and after RoPE and repeat,
  // the attention output, the MLP's three intermediates and their product; scores, softmax and mask per head.
  const int64_t per_layer = f * tokens * (8 * m.hidden_size + 4 * q + 6 * kv + 5 * m.intermediate_size) +
                            f * batch * m.num_attention_heads * seq_len * seq_len * 3;
  const int64_t logits = f * tokens * m.vocab_size * 3;  // logits, log-softmax, their gradient
  const int64_t rotation = f * 8 * m.hidden_size * m.hidden_size;
  return held + weight_graph + m.num_hidden_layers * per_layer + logits + rotation;
}

double RotationTrainingFlops(const checkpoint::ModelConfig& m, int64_t seq_len, int64_t batch, int64_t steps,
                             bool trains_r2) {
  const double h = static_cast<double>(m.hidden_size);
  const double tokens = static_cast<double>(seq_len) * static_cast<double>(batch);
  const double decoder = static_cast<double>(DecoderParameters(m));
  const double lm_head = static_cast<double>(m.vocab_size) * h;
  const double layers = static_cast<double>(m.num_hidden_layers);
  const double head_dim = static_cast<double>(m.head_dim);
  // Rotating every weight that reads or writes the residual (all of the decoder's, and the lm_head): W R1 is a
  // product of each weight with an H x H matrix; R2 turns v_proj and o_proj per head.
  double rotate = 2.0 * (decoder + lm_head) * h;
  if (trains_r2) {
    const double v_o = 2.0 * static_cast<double>(m.num_key_value_heads + m.num_attention_heads) * head_dim * h;
    rotate += layers * 2.0 * v_o * head_dim;
  }
  const double attention = layers * 4.0 * static_cast<double>(batch) * static_cast<double>(m.num_attention_heads) *
                           head_dim * static_cast<double>(seq_len) * static_cast<double>(seq_len);
  const double forward = 2.0 * (decoder + lm_head) * tokens + attention;
  // The Cayley transform solves (I - A/2) against (I + A/2) for each rotation: ~3 n^3 with the skew product.
  double cayley = 3.0 * h * h * h;
  if (trains_r2) cayley += layers * 3.0 * head_dim * head_dim * head_dim;
  // Forward and backward (twice the forward) through the rotation of the weights as through the model.
  return static_cast<double>(steps) * (3.0 * (rotate + forward) + cayley);
}

}  // namespace quark::estimate
