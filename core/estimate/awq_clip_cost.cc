#include "core/estimate/awq_clip_cost.h"

#include "core/checkpoint/token_pass_memory.h"

namespace quark::estimate {

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
