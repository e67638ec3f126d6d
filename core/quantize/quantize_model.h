// The user's main job in one call: a float HF model folder in, a quantized HF-quark export out (vLLM loads it with
// quantization="quark"), perplexity before and after when asked. The gRPC worker and `quark quantize` both call it.
//
//   validate the Config against the model -> plan the export (refuses unpackable shapes before any work)
//   -> stream the model one decoder layer at a time: GPTQ its linears when algo_config asks (gptq_pass.h),
//      replace its linears by QuantLinears, calibrate their static
//      observers on the inputs the already-quantized previous layers produce, freeze, share the KV-cache scale,
//      compute the layer's outputs through the quantized layer, write the finished layer's tensors, release it
//   -> finish the shards, config.json, tokenizer files -> check the consumer rules -> publish
//   -> optionally evaluate: float, fake-quantized (same calibrated scales), and the export reloaded from disk.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace quark {
namespace runtime {
class ComputeDevice;  // core/runtime/compute_device.h
}  // namespace runtime

/// One progress report: phases "prepare", "rotation" (a trainable rotation's steps, #35), "evaluate_float",
/// "quantize" (layer i of N, calibrated and written),
/// "finish", "evaluate_quantized", "evaluate_reloaded", "done". `fraction` is of the whole run, in [0, 1];
/// `eta_seconds` is an estimate for the rest of the current phase (0 when unknown).
struct QuantizeProgress {
  std::string phase;
  int layer = 0;
  int num_layers = 0;
  double fraction = 0;
  double eta_seconds = 0;
  std::string message;
};

struct QuantizeModelOptions {
  quark::Config config;           // resolved (preset expanded, kv-cache and exclude applied)
  /// Where the passes run: "cpu", "cuda", "cuda:N" (runtime/compute_device.h); exports and checkpoints are written
  /// from host memory. A device this process cannot use fails at once with FAILED_PRECONDITION naming it.
  std::string device = "cpu";
  /// The dtype the streamed layers and their activations compute in: "f32" (the default: every parity with Quark
  /// and between devices is stated for it) or "bf16", a GPU's fast path (an H200 multiplies bf16 ~16x faster than
  /// float32 without TF32, and the calibration's two forwards a layer are GEMM-bound): calibration ranges, Hessians,
  /// the scaling searches and the evaluations then see bf16 activations, as the peers' GPU runs do. The weights'
  /// grids and the exports' layout are the same; the chosen parameters move within bf16's rounding.
  std::string compute_dtype = "f32";
  /// Bytes of device memory the run's layers and activations may hold (StreamerOptions::device_memory_budget's
  /// formula, checked before each layer computes: past it the run fails naming the layer and the bytes). 0 = on a
  /// GPU, 90% of the device's free memory when the run starts (runtime/device_memory.h); on the CPU no budget.
  int64_t device_memory_budget = 0;
  /// Device bytes AWQ's searches may use to evaluate several trials at once (ratios of its grid in one forward of
  /// the inspected module, clip shrink factors in one product: algorithms/search_batch.h), counted in the budget.
  /// -1 = 2 GiB on a GPU (each small operation there is a launch) and 256 MiB elsewhere (small trials batched, a
  /// large model's one at a time); 0 = one trial at a time (Quark's loop; on the CPU the same bits either way).
  int64_t search_batch_bytes = -1;
  std::string output_dir;         // receives the exports; empty = no export (fake-quantized evaluation only)
  /// "hf_quark" (the default when empty; vLLM), "gguf" (llama.cpp), "onnx" (ONNX Runtime), written in one pass. With
  /// one format the artifact is output_dir itself (GGUF: output_dir/model.gguf); with several each has its own place:
  /// output_dir/hf_quark/, output_dir/model.gguf, output_dir/onnx/.
  std::vector<std::string> export_formats;
  /// llama-quantize's file type for the weights the engine leaves in float ("F16", "Q8_0", "Q4_0", "Q4_K_M",
  /// "IQ4_XS", ... gguf_mixture.h), with its per-tensor mixture; empty = the engine's quantized codes and the
  /// source's float types. With no quantization scheme at all, a GGUF export with a type quantizes the float model
  /// as `llama-quantize` does.
  std::string gguf_type;
  /// With gguf_type: every float weight in that type (llama-quantize --pure) instead of llama-quantize's mixture.
  bool gguf_pure = false;
  /// llama.cpp importance matrix (GGUF or legacy .dat) for the GGUF's float weights, as `llama-quantize --imatrix`.
  std::string gguf_imatrix;
  /// Instead of gguf_imatrix: the importance matrix of this run's calibration pass (imatrix_collector.h: the inputs
  /// of every decoder-layer matrix, per expert for MoE, as llama-imatrix gathers them), used by the GGUF's K-quant
  /// and IQ4 weights and written as imatrix.gguf beside model.gguf. Needs calibration data (calibration_file, else
  /// the evaluation text).
  bool gguf_imatrix_from_calibration = false;
  /// Text (random windows), JSONL "text" or token ids (one sample per line, in order). Read only when something
  /// consumes activations (GPTQ, static activations, KV-cache scales); empty then = the evaluation text, and
  /// without one an INVALID_ARGUMENT asking for data.
  std::string calibration_file;
  int num_calibration_samples = 128;
  int seq_len = 512;              // calibration window, capped at max_position_embeddings
  /// MoE calibration coverage (quantize/expert_coverage.h): an expert the router sends fewer tokens over the whole
  /// calibration set also runs, for statistics only, on its best-ranked other tokens up to this many; 0 = no top-up
  /// (an expert then left without tokens fails a run that needs its statistics, naming it).
  int64_t moe_min_expert_tokens = 32;
  /// #32 item 5: the routed experts of MoE layers streamed in groups of this many (runtime/expert_streaming.h): each
  /// expert's weights are read from the checkpoint when a pass needs them and at most this many experts are in
  /// memory at once, so a layer costs its attention, router and shared expert plus G experts. 0 = the whole layer
  /// (today's path); the outputs and exports are the same bytes either way. RTN schemes only: with an algo_config
  /// the run is refused naming it (the algorithms keep per-linear state for the whole layer).
  int64_t expert_group_size = 0;
  uint64_t seed = 42;
  std::string eval_text_file;     // empty = no perplexity
  int eval_seq_len = 0;           // 0 = defaults of the perplexity protocol
  int eval_max_windows = 0;
  /// The accuracy gate: the largest relative perplexity increase allowed (0.02 = +2%) for the fake-quantized model
  /// and every export read back; broken -> FAILED_PRECONDITION with the figures, and output_dir is removed (nothing
  /// is published). Needs eval_text_file. Unset = no gate.
  std::optional<double> max_ppl_increase;
  int64_t max_shard_bytes = 5LL << 30;
  /// Resume: a folder that outlives the process (the worker's data dir). After each finished layer the run records
  /// there what it needs to redo that layer (layer_checkpoint.h); a later run with the same inputs (model files,
  /// config, calibration data, exports, output_dir, threads) restores layers 0..k-1 from it, bit for bit and without
  /// calibrating them or running their algorithms, clears output_dir of the earlier run's partial files and goes on
  /// at layer k. Empty = no checkpoints. The caller removes the folder once the artifact is safe
  /// (quantize::RemoveLayerCheckpoint).
  std::string checkpoint_dir;
  // --- Checkpoints kept off this machine (#34 item 1) ---
  /// The model and calibration as the caller knows them on every machine (model URI, object sizes and ETags):
  /// when set, the checkpoint fingerprint uses it and the calibration text's digest instead of the local paths,
  /// modification times and output_dir, so a checkpoint copied to another machine resumes there. Empty = local.
  std::string checkpoint_identity;
  /// Called after layer `finished_layers - 1`'s checkpoint is complete in checkpoint_dir (state.json names it);
  /// the worker copies it to object storage from here. May be empty.
  std::function<void(int64_t finished_layers)> on_layer_checkpointed;
  // --- end #34 item 1 ---
  std::function<void(const QuantizeProgress&)> on_progress;  // may be empty
  std::function<bool()> cancelled;                           // may be empty; checked between layers -> CANCELLED
  /// One-off lines worth keeping in a job's event log besides the progress ("resumed at layer k of N", "checkpoint
  /// discarded: ..."); they are also reported as progress messages. May be empty.
  std::function<void(const std::string&)> on_notice;
  /// The run's figures (the report's metrics) when it ends, also when the accuracy gate fails it: a job keeps its
  /// perplexities in its result either way. May be empty.
  std::function<void(const std::map<std::string, double>&)> on_metrics;
  // --- #36 item 1: a sweep's children share one float evaluation (worker/float_baseline.h) ---
  /// Asked for the float model's perplexity over this evaluation text and windows where the run would measure it:
  /// a value is ppl_before without the float pass (and the metric float_ppl_shared = 1); nullopt measures it. May be
  /// empty (measure).
  std::function<std::optional<double>()> known_float_ppl;
  /// Given the float perplexity the run measured (ppl_before), for others to reuse. May be empty.
  std::function<void(double)> on_float_ppl;
};

struct QuantizeModelReport {
  /// ppl_before, ppl_after (fake-quantized), ppl_reloaded (the HF-quark export read back), ppl_gguf (the GGUF export
  /// read back), ppl_compressed_tensors (the compressed-tensors export read back, #30); each only with that export and
  /// evaluation text,
  /// seconds_total, seconds_quantize, seconds_eval, num_layers, num_calibration_samples, calibration_tokens,
  /// resumed_at_layer (only when a checkpoint let the run skip layers).
  std::map<std::string, double> metrics;
  nlohmann::ordered_json quantization_config;  // as written into the export's config.json
  std::vector<std::string> files;              // file names in output_dir (with several formats: "<format>/<file>")
  /// One line per scaling pair per layer from SmoothQuant / AutoSmoothQuant / AWQ (prev_op, layers, ratio, scales).
  std::vector<std::string> algorithm_log;
};

/// Errors: INVALID_ARGUMENT naming the field for a Config that does not fit the model (e.g. a group size that does
/// not divide 172) or a shape the export cannot pack; UNIMPLEMENTED for a quantized embedding / lm_head or an
/// algo_config entry this engine does not run (naming algo_config[i]);
/// ALREADY_EXISTS for a non-empty output_dir; CANCELLED when `cancelled` returned true; FAILED_PRECONDITION when
/// the export breaks a consumer rule (nothing is published then); file errors name the file.
absl::StatusOr<QuantizeModelReport> QuantizeModel(const std::string& model_dir, const QuantizeModelOptions& options);

/// The float model's perplexity exactly as QuantizeModel measures ppl_before with these options (device, compute dtype,
/// evaluation text, seq_len, windows), without quantizing: a sweep's first child measures it once for all
/// (#36 item 1). INVALID_ARGUMENT naming eval_text_file when there is none; the model's errors as QuantizeModel's.
absl::StatusOr<double> MeasureFloatPerplexity(const std::string& model_dir, const QuantizeModelOptions& options);
/// The same run on a device handle (options.device is not read): the passes compute on `device`, the exports and
/// checkpoints receive host tensors. Tests pass devices QuantizeModel does not open (tests/support/lazy_device.h).
absl::StatusOr<QuantizeModelReport> QuantizeModelOn(const runtime::ComputeDevice& device, const std::string& model_dir,
                                                    const QuantizeModelOptions& options);

}  // namespace quark
