#include "core/quantize/pass_memory.h"

#include <algorithm>
#include <map>
#include <string>
#include <variant>

#include "core/base/strings.h"
#include "core/config/row_groups.h"
#include "core/runtime/compute_device.h"
namespace quark::quantize {
namespace {

// A quantized weight's parameters, a scale and a zero point per group in float32 (an upper bound for the narrower
// scale types): per group of input columns, per channel, per block, or one pair.
int64_t WeightParamBytes(const LayerQuantConfig& config, int64_t out, int64_t in) {
  if (!config.weight) return 0;
  const QuantSpec& w = *config.weight;
  const int64_t group = std::max<int64_t>(1, w.group_size.value_or(1));
  const auto per = [](int64_t n, int64_t g) { return (n + g - 1) / g; };
  switch (w.qscheme) {
    case QScheme::kPerGroup: return out * per(in, group) * 8;
    case QScheme::kPerChannel: return out * 8;
    case QScheme::kPerBlock:
      if (w.block_size.size() == 2) return per(out, std::max(1, w.block_size[0])) * per(in, std::max(1, w.block_size[1])) * 8;
      return out * in * 8;  // an unknown tile: every element its own (never less than the real count)
    case QScheme::kPerTensor: break;
  }
  return 8;
}

}  // namespace

absl::StatusOr<int64_t> SearchBatchBytes(int64_t requested, const at::Device& device) {
  if (requested < -1) {
    return absl::InvalidArgumentError(StrCat("search_batch_bytes: ", requested,
                                             " must be >= 0 (0 = one trial at a time) or -1 (by the device)"));
  }
  if (requested >= 0) return requested;
  return runtime::QueuesLaunches(device) ? checkpoint::kGpuSearchBatchBytes : checkpoint::kCpuSearchBatchBytes;
}

PassMemoryOptions PassMemoryOptionsFor(const Config& config, at::ScalarType compute_dtype, const at::Device& device,
                                       int64_t expert_group_size, int64_t search_batch_bytes) {
  PassMemoryOptions options;
  options.element_bytes = static_cast<int64_t>(c10::elementSize(compute_dtype));
  for (const AlgoConfig& algo : config.algo_config) {
    if (const auto* gptq = std::get_if<GptqAlgo>(&algo)) {
      options.gptq = true;
      options.token_passes.float_stream |= gptq->method != HessianMethod::kGptq;  // GPTAQ, Qronos
      // Experts in groups record the routed block's inputs and a group's calls (GPTAQ and Qronos are refused there).
      if (gptq->method == HessianMethod::kGptq) options.token_passes.gptq_expert_group = expert_group_size;
    }
    options.autoround |= std::holds_alternative<AutoRoundAlgo>(algo);
    options.token_passes.autoround |= std::holds_alternative<AutoRoundAlgo>(algo);
    options.token_passes.awq |= std::holds_alternative<AwqAlgo>(algo);
    options.token_passes.autosmoothquant |= std::holds_alternative<AutoSmoothQuantAlgo>(algo);
    options.token_passes.float_stream |= std::holds_alternative<AwqAlgo>(algo) ||
                                         std::holds_alternative<AutoSmoothQuantAlgo>(algo) ||
                                         std::holds_alternative<SmoothQuantAlgo>(algo);
  }
  options.tensor_ops = !device.is_cpu();
  options.expert_group_size = expert_group_size;
  if (options.token_passes.awq) options.search_batch_bytes = search_batch_bytes;
  return options;
}

int64_t PassDeviceMemory(const runtime::DecoderLayer& layer, const LayerPlan& plan, const PassMemoryOptions& options,
                         int64_t tokens) {
  // Shapes only: a streamed expert's weight() would load it.
  int64_t copies = 0, largest_weight = 0, largest_hessian = 0, awq_clip = 0, tuned = 0;
  std::map<std::string, int64_t> step_hessians;  // step key -> its Hessians' bytes
  std::map<std::string, int64_t> streamed_copy;  // step key of streamed experts -> one expert's weight bytes
  const bool streamed = options.expert_group_size > 0;
  for (const runtime::NamedLinear& linear : layer.NamedLinears()) {
    const LayerAssignment* assignment = plan.Find(linear.name);
    if (assignment != nullptr && (assignment->source == ConfigSource::kExcluded || assignment->config.Empty())) continue;
    const int64_t out = linear.linear->out_features(), in = linear.linear->in_features();
    // GPTQ's MoE steps take one projection of every expert: "mlp.experts.*.down_proj".
    const std::string key = checkpoint::ExpertKind(linear.relative_name);
    const bool expert = key != linear.relative_name;
    const int64_t copy = out * in * options.element_bytes +
                         (assignment != nullptr ? WeightParamBytes(assignment->config, out, in) : 0);
    if (streamed && expert) {
      streamed_copy[key] = std::max(streamed_copy[key], copy);
    } else {
      copies += copy;
    }
    if (options.token_passes.awq && assignment != nullptr && assignment->config.weight &&
        checkpoint::AwqClipsLinear(linear.relative_name)) {
      const int64_t group = RowGroupColumns(*assignment->config.weight, in);
      const int64_t sampled = expert || tokens <= 0 ? checkpoint::AwqClipMostSampledTokens(tokens)
                                                    : checkpoint::AwqClipSampledTokens(tokens);
      awq_clip = std::max(awq_clip, checkpoint::AwqClipElements(out, in, group, sampled) * options.element_bytes);
    }
    if (options.autoround) tuned += checkpoint::kAutoRoundWeightCopies * out * in * 4;
    if (!options.gptq) continue;
    largest_weight = std::max(largest_weight, out * in * 4);
    largest_hessian = std::max(largest_hessian, in * in * 4);
    if (streamed && expert) {
      step_hessians[linear.relative_name] += in * in * 4;  // one expert at a time
    } else {
      step_hessians[key] += in * in * 4;
    }
  }
  for (const auto& [key, bytes] : streamed_copy) copies += bytes * options.expert_group_size;
  int64_t hessians = 0;
  for (const auto& [key, bytes] : step_hessians) hessians = std::max(hessians, bytes);
  if (options.tensor_ops) {
    hessians += (kTensorOpsHessianCopies - 1) * largest_hessian;
    largest_weight *= kTensorOpsWeightCopies;
  }
  if (awq_clip > 0) awq_clip += options.search_batch_bytes;
  return std::max({copies + awq_clip, hessians + largest_weight, tuned});
}

int64_t PassDeviceBytesPerToken(const checkpoint::ModelConfig& config, const runtime::DecoderLayer& layer,
                                const LayerPlan& plan, const PassMemoryOptions& options) {
  const auto quantized = [&](const checkpoint::LinearSpec& linear) {
    const LayerAssignment* a = plan.Find(layer.prefix() + linear.relative_name);
    return a == nullptr || (a->source != ConfigSource::kExcluded && a->config.weight.has_value());
  };
  return checkpoint::TokenPassElements(checkpoint::LayerLinears(config, layer.index()), quantized, config,
                                       options.token_passes) *
         options.element_bytes;
}

}  // namespace quark::quantize
