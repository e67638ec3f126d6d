// Time, peak host/GPU memory and artifact sizes of a quantization job, per phase, from the model's shapes
// (model_shape.h), the resolved Config with its algorithms, the calibration and evaluation sizes and one worker's
// measured throughputs (throughput.h). The engine streams the model one decoder layer at a time
// (core/runtime layer streaming), which is what the memory model rests on.
//
// Memory (host; a CUDA worker holds the same working set on the GPU and the streamed bf16 layer on the host):
//   base        kProcessBaseBytes: LibTorch, the runtime and the allocator's slack (fitted, see docs/results.md)
//   layer       4 x P_layer: the float32 compute copy of the largest decoder layer, and as much again for its
//               fake-quantized weights while the layer is in flight (both alive until the layer is written); GPTQ
//               quantizes in place, so its phase holds the float32 copy and the streamed bfloat16 layer (1.5 x)
//               With experts streamed in groups (JobInputs::expert_group_size = G, runtime/expert_streaming.h)
//               P_layer is the layer's parameters but its routed experts' plus G of them: at most G experts hold
//               their float32 and fake-quantized weights at once, the attention, router and shared experts as before;
//               GPTQ then quantizes expert by expert: one expert's Hessians at a time (not a step's, below) beside
//               the routed block's inputs (tokens x hidden x 4) and the recorded inputs of G experts (their routed
//               share of the tokens + kExpertTopUpTokens each), which ceil(E / G) passes of each MoE layer's router
//               and shared expert record
//   activations samples x seq_len x hidden x 4 bytes, twice (a layer's input and output hidden states), plus
//               one sample's forward at its widest (checkpoint::ForwardWorkspaceBytes: a score block and its softmax
//               beside q, k, v, or the MLP's intermediates; the device budget's workspace term)
//   gptq        + kGptqHessianCopies x K^2 x 4 per input of the largest GPTQ step (the Hessian, permuted for act
//               order and factored in its own memory; a dense model's step reads one input, the widest K counts; an
//               MoE step, one projection of every expert, holds all its experts' Hessians at once) + kGptqWorkspaceBytes (BLAS and LAPACK buffers and the captured
//               layer inputs, which the phases without GPTQ never allocate). GPTQ's working copy of a weight ends as
//               its fake-quantized weight, which the layer term counts.
//   evaluate    base + layer + tokens-per-window x (hidden + vocab) x 4 (hidden states and logits of a window)
// Time (seconds = work / the worker's rate for that kind of work):
//   load        source bytes / disk read rate + kLoadConvertPasses x float32 bytes / fake-quant rate
//   calibrate   forwards x (2 x linear params x tokens FLOPs + 4 x seq_len^2 x hidden per sample and layer for
//               attention) / GEMM rate, only when something needs activations: forwards is 1 (each quantized layer's
//               outputs feed the next) + 1 when activations or the KV cache are observed (the float pass before it)
//   gptq        one forward that captures the inputs, then per decoder layer and per group of linears sharing an
//               input (q/k/v, gate/up): the Hessian 2 x tokens x K^2 at GEMM rate and its inverse factor (Cholesky,
//               inverse, Cholesky: ~1.35 x K^3) at Cholesky rate; per linear the lazy block updates (out x K^2,
//               GEMM rate) and the column loop (rank-1 updates inside each block of block_size columns: out x K x
//               block_size FLOPs at a quarter of the GEMM rate); on a GPU also device operations at
//               device_op_seconds each (launch-bound): kGptqOpsPerFusedBlock per block of the fused blocks (every
//               grid of core/config/gptq_block_grid.h), kGptqOpsPerColumn per column of the column loop (the rest)
//   awq / autosmoothquant   grid_size forwards of every scaled linear over the calibration tokens (GEMM rate)
//               + grid_size fake quantizations of those weights; smoothquant: one fake quantization pass
//   rotation    2 x out x in x hidden FLOPs for every linear that reads or writes the residual stream
//   quantize_export  kFakeQuantPasses x float32 weight bytes at the fake-quant rate (observe, quantize, pack),
//                    plus float-format (fp8/fp6/fp4) weights once more at the probe's float-codes rate (their
//                    codes come from a scalar path, measured: 28% of an fp8 7B export's profile)
//               + artifact bytes / disk write rate
//   evaluate    2 x params x tokens FLOPs per perplexity run at GEMM rate + the weights read back per run
//               (runs: float and quantized model, + one per export read back when the accuracy gate is on)
//   evaluate_tasks  per model (float + each export read back), the scorer's counted work priced by TaskSeconds
//               (task_cost.h: passes x weights read, decoder GEMMs, and the fitted per-sample-layer, per-request,
//               vocabulary-projection and per-logit terms); memory: base + layer + kTaskActivationBytes
//   evaluate_kld    per export, the float model and the export over the evaluation tokens, as evaluate's runs
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/estimate/artifact_size.h"
#include "core/estimate/model_shape.h"
#include "core/estimate/task_cost.h"
#include "core/estimate/throughput.h"

namespace quark::estimate {

/// The fitted constants (docs/results.md, "Estimates vs measured", says how).
inline constexpr uint64_t kProcessBaseBytes = 140ull << 20;
/// Work in units of the probe's fake-quantization kernel (an unfused chain of eight elementwise ops, slower per
/// byte than the engine's kernels): converting the source to float32 costs a quarter of it per byte, observing,
/// quantizing and packing a weight one.
inline constexpr double kLoadConvertPasses = 0.25;
inline constexpr double kFakeQuantPasses = 1.0;
// Fitted on two shapes (docs/results.md): a 7B layer (K = 11008) and a 1536/4096 layer (K = 4096), refitted when
// the factorisation moved into the Hessian's own memory (2026-11-26) and when the first calibration batch began
// writing the Hessian without a product in between (2026-11-27: the 1536/4096 layer's GPTQ extra measured 113 MiB),
// and when GPTQ began quantizing its working copy in place instead of into a second one and permuting the Hessian in
// its own memory (2026-11-27: the 1536/4096 layer's GPTQ extra measured 14.6 MiB, a 1024/8192 layer's 216.7 MiB).
inline constexpr double kGptqHessianCopies = 1.0;
inline constexpr uint64_t kGptqWorkspaceBytes = 8ull << 20;
/// Device operations per column of GPTQ's tensor-operation column loop (gptq_tensor_ops.cc: the column's dtype
/// round trip, fake quantization, error, and the outer-product update), each costing Throughput::device_op_seconds.
inline constexpr double kGptqOpsPerColumn = 10;
/// Device operations per block of GPTQ's fused blocks (gptq_fused_blocks.cc; GptqOptions::fused_blocks, on by default,
/// for the grids of core/config/gptq_block_grid.h): the block's one fused launch per group segment, the observation
/// of each group's parameters as it starts (about ten small operations), and the lazy update's slices, product and
/// subtraction.
/// Before fused blocks the column loop paid kGptqOpsPerColumn a column: on the H200 ~200 s of a 7B job's launches.
inline constexpr double kGptqOpsPerFusedBlock = 16;
/// The tokens the calibration top-up gives each expert short of them (QuantizeModelOptions::moe_min_expert_tokens'
/// default, quantize/expert_coverage.h): what GPTQ of experts in groups records per expert beside its routed tokens.
inline constexpr double kExpertTopUpTokens = 32;
/// The task scorer's hidden-state memory per streamed pass (TaskScoreOptions::activation_bytes_per_pass).
inline constexpr uint64_t kTaskActivationBytes = 256ull << 20;

struct JobInputs {
  Config config;                  // resolved, algo_config included
  int64_t calibration_samples = 128;
  int64_t calibration_seq_len = 512;
  std::vector<ExportKind> formats = {ExportKind::kHfQuark};
  std::string gguf_type;           // JobSpec.gguf_type, gguf_pure, and an importance matrix given or gathered
  bool gguf_pure = false;
  bool gguf_imatrix = false;
  int64_t evaluation_tokens = 0;  // 0 = no evaluate phase
  int64_t evaluation_seq_len = 2048;
  bool accuracy_gate = false;     // the exports are read back and evaluated too
  // #31, tasks and KLD after the export (core/eval/model_evaluation.h): evaluate_tasks scores every task on each
  // model (EstimatedTaskWork's counts, task_cost.h); evaluate_kld streams the float model and one export over the
  // evaluation text per export read back.
  std::vector<std::string> tasks;  // lm-eval task names
  int64_t task_limit = 0;          // --limit (0 = all)
  std::optional<int64_t> num_fewshot;  // --num-fewshot (unset: each task's default; task_cost.h's DefaultFewshot)
  int64_t task_models = 0;         // float + the exports read back
  int64_t kld_exports = 0;        // exports whose KLD is measured (0 = no evaluate_kld phase)
  /// #32 item 5: MoE layers' routed experts streamed in groups of this many (QuantizeModelOptions::expert_group_size;
  /// 0 = the whole layer). RTN schemes or GPTQ alone: another algo_config is refused as the run refuses it.
  int64_t expert_group_size = 0;
};

struct PhaseEstimate {
  std::string phase;
  double seconds = 0;
  uint64_t peak_host_bytes = 0;
  uint64_t peak_gpu_bytes = 0;
};

struct ArtifactEstimate {
  ExportKind format = ExportKind::kHfQuark;
  uint64_t bytes = 0;
};

struct JobEstimate {
  std::vector<PhaseEstimate> phases;
  std::vector<ArtifactEstimate> artifacts;
  std::vector<std::string> notes;  // what is not modelled for this job (e.g. an ONNX size)
  double total_seconds = 0;
  uint64_t peak_host_bytes = 0;
  uint64_t peak_gpu_bytes = 0;
  std::string peak_host_phase;     // where the host peak is
  std::string peak_gpu_phase;
};

/// Whether the job reads calibration data: an algorithm, static activations or KV-cache scales.
bool NeedsCalibration(const Config& config);

/// The estimate on a worker with `rates`. INVALID_ARGUMENT when a rate is not positive.
absl::StatusOr<JobEstimate> EstimateJob(const ModelShape& model, const JobInputs& job, const Throughput& rates);

}  // namespace quark::estimate
