// What a quantize run's passes hold beside a layer's forward, for the device budget (runtime::StreamerOptions::
// pass_memory): the streamer counts the layer's weights, the hidden states and one sample's forward; the passes add
// their own copies. tests/quantize/pass_memory_test.cc holds the sum against the tensor bytes the passes allocate.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/token_pass_memory.h"
#include "core/config/layer_plan.h"
#include "core/runtime/decoder_layer.h"

namespace quark::quantize {

// GPTQ's tensor-operation path, as the same tensor operations hold them on the CPU (pass_memory_test): the working
// Hessian, its Cholesky factor, cholesky_inverse's result and the upper factor of that are alive together (4 K x K);
// quantizing a weight holds 3 float32 copies of it (the working copy, the quantized columns, the lazy update's
// product) beside the factor and the fused blocks' row-major copy of it (2 K x K, within the 4).
inline constexpr int64_t kTensorOpsHessianCopies = 4;
inline constexpr int64_t kTensorOpsWeightCopies = 3;

struct PassMemoryOptions {
  /// Bytes of one element of the compute dtype (the layer's weights as placed, and their quantized copies).
  int64_t element_bytes = 4;
  /// GPTQ (or GPTAQ / Qronos) runs on the layer.
  bool gptq = false;
  /// GPTQ runs in tensor operations (algorithms/gptq_tensor_ops.h: the path of every device but the CPU), which hold
  /// more copies than the CPU path's in-place LAPACK: kTensorOpsHessianCopies K x K matrices at the factorisation's
  /// widest and kTensorOpsWeightCopies float32 copies of the weight while its columns are quantized.
  bool tensor_ops = false;
  /// MoE experts streamed in groups of this many (QuantizeModelOptions::expert_group_size; 0 = the whole layer):
  /// only that many experts' copies are resident, and GPTQ holds one expert's Hessians at a time, not a step's for
  /// every expert.
  int64_t expert_group_size = 0;
  /// AutoRound trains the layer's quantized linears (checkpoint::kAutoRoundWeightCopies of their weights; its forwards
  /// keep what their backward reads: runtime::StreamerOptions::training_forward).
  bool autoround = false;
  /// The passes that keep per-token copies of the layer's activations (checkpoint/token_pass_memory.h).
  checkpoint::TokenPasses token_passes;
  /// AWQ's searches evaluate trials in batches of at most these bytes (AwqOptions::search_batch_bytes; 0 = one
  /// trial at a time).
  int64_t search_batch_bytes = 0;
};

/// The search batch of a run that asked for `requested` bytes (QuantizeModelOptions::search_batch_bytes): -1 means
/// checkpoint::kGpuSearchBatchBytes on a device that queues launches (runtime::QueuesLaunches) and
/// checkpoint::kCpuSearchBatchBytes elsewhere; anything else as asked. INVALID_ARGUMENT naming search_batch_bytes
/// below -1.
absl::StatusOr<int64_t> SearchBatchBytes(int64_t requested, const at::Device& device);

/// What a QuantizeModel run with `config` passes: the compute dtype's element size, GPTQ when algo_config has it,
/// tensor operations on any device but the CPU, experts streamed in groups of `expert_group_size`, AWQ's trials in
/// batches of `search_batch_bytes` (SearchBatchBytes's result).
PassMemoryOptions PassMemoryOptionsFor(const Config& config, at::ScalarType compute_dtype, const at::Device& device,
                                       int64_t expert_group_size, int64_t search_batch_bytes = 0);

/// The bytes, at their widest, that the passes hold for `layer` beyond what the streamer counts: the larger of
///   quantized copies: every linear the plan quantizes keeps its fake-quantized weight beside the float one until
///                     the export releases it, with its parameters (a float32 scale and zero point per group, channel
///                     or block) (the sum over the linears; of routed experts streamed in groups, one group's);
///   GPTQ:             the Hessians of one step in float32 (K^2 * 4 per input the step reads; a step of routed
///                     experts reads one input per expert) plus the float32 working copy of the largest weight (in
///                     tensor operations: kTensorOpsHessianCopies of the largest Hessian beside the step's others,
///                     and kTensorOpsWeightCopies of the weight)
///   AWQ's clip search: checkpoint::AwqClipElements for the widest linear it clips over the tokens it samples of
///                     `tokens` (every calibration sample's; a routed expert's AwqClipMostSampledTokens, as is
///                     every linear's when `tokens` is 0), beside the copies, and search_batch_bytes where its
///                     searches batch their trials
///   AutoRound:        checkpoint::kAutoRoundWeightCopies float32 copies of every quantized linear's weight
/// (GPTQ and AutoRound edit the float weights before the quantized linears are installed: never alive together).
/// Linears the plan does not know count as quantized (an upper bound; the run refuses them anyway).
int64_t PassDeviceMemory(const runtime::DecoderLayer& layer, const LayerPlan& plan, const PassMemoryOptions& options,
                         int64_t tokens = 0);

/// The bytes per calibration token the passes keep beside the streamer's hidden states while the activations are on
/// the device (checkpoint::TokenPassElements in the compute dtype): the scaling searches' recorded inputs, the float
/// stream. Linears the plan does not know count as quantized.
int64_t PassDeviceBytesPerToken(const checkpoint::ModelConfig& config, const runtime::DecoderLayer& layer,
                                const LayerPlan& plan, const PassMemoryOptions& options);

}  // namespace quark::quantize
