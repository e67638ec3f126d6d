#include "core/estimate/awq_cost.h"

#include "core/checkpoint/token_pass_memory.h"

namespace quark::estimate {

AwqGridWork& AwqGridWork::operator+=(const AwqGridWork& other) {
  forward_flops += other.forward_flops;
  trial_weight_bytes += other.trial_weight_bytes;
  return *this;
}

bool AwqRunsInsideAnInspectedBlock(const std::string& name) {
  const size_t dot = name.rfind('.');
  const std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
  const bool in_attention = name.find("attn.") != std::string::npos;
  return (in_attention && (leaf == "o_proj" || leaf == "out_proj")) || leaf == "down_proj" || leaf == "w2";
}

AwqGridWork AwqGridLinearWork(const std::string& name, int64_t out, int64_t in, double active_weights, int64_t tokens,
                              int grid) {
  AwqGridWork work;
  if (out <= 0 || in <= 0 || grid <= 0) return work;
  const double runs = AwqRunsInsideAnInspectedBlock(name) ? 2.0 : 1.0;
  work.forward_flops = runs * (grid + 1.0) * 2.0 * active_weights * static_cast<double>(tokens);
  work.trial_weight_bytes = grid * 4.0 * static_cast<double>(out) * static_cast<double>(in);
  return work;
}

AwqGridWork AwqGridAttentionWork(int64_t hidden, int64_t seq, int64_t samples, int grid) {
  AwqGridWork work;
  if (grid <= 0) return work;
  work.forward_flops = (grid + 1.0) * 4.0 * static_cast<double>(seq) * static_cast<double>(seq) *
                       static_cast<double>(hidden) * static_cast<double>(samples);
  return work;
}

double AwqGridSeconds(const AwqGridWork& work, const Throughput& rates) {
  return work.forward_flops / rates.gemm_flops + work.trial_weight_bytes / rates.fake_quant_bytes_per_s;
}

ClipSearchWork& ClipSearchWork::operator+=(const ClipSearchWork& other) {
  product_flops += other.product_flops;
  trial_weight_bytes += other.trial_weight_bytes;
  return *this;
}

ClipSearchWork AwqClipSearchWork(const std::string& name, int64_t out, int64_t in, int64_t tokens) {
  ClipSearchWork work;
  if (!checkpoint::AwqClipsLinear(name) || out <= 0 || in <= 0 || tokens <= 0) return work;
  const double sampled = static_cast<double>(checkpoint::AwqClipSampledTokens(tokens));
  const double shrinks = checkpoint::kAwqClipShrinks;
  const double weights = static_cast<double>(out) * static_cast<double>(in);
  work.product_flops = (shrinks + 1) * 2.0 * sampled * weights;
  work.trial_weight_bytes = shrinks * weights * 4.0;
  return work;
}

double AwqClipSearchSeconds(const ClipSearchWork& work, const Throughput& rates) {
  return work.product_flops / rates.gemm_flops + work.trial_weight_bytes / rates.fake_quant_bytes_per_s;
}

}  // namespace quark::estimate
