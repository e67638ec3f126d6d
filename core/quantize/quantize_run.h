// QuantizeRun: one QuantizeModel call from the model folder to the exports (the class behind quantize_model.h).
// Private to core/quantize: quantize_model.cc (preparation, exports, inputs, evaluation, the run) and
// quantize_run_layers.cc (the layer loop: calibration, checkpoints, the evaluation after, the accuracy gate).
#pragma once

#include "core/quantize/quantize_model.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>

#include <ATen/Parallel.h>

#include "absl/strings/str_format.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/model_modules.h"
#include "core/config/layer_plan.h"
#include "core/config/llama_cpp_rules.h"  // #37 item 4
#include "core/config/quark_json.h"
#include "core/config/validation.h"
#include "core/algorithms/layer_scaling.h"
#include "core/algorithms/rotation.h"
#include "core/export/gguf_blocks.h"
#include "core/export/gguf_source.h"
#include "core/export/gguf_writer.h"
#include "core/export/ct_writer.h"
#include "core/export/hf_quark_checker.h"
#include "core/export/hf_quark_writer.h"
#include "core/export/onnx_exporter.h"
#include "core/quantize/calibration_input.h"
#include "core/quantize/export_agreement.h"
#include "core/quantize/autoround_pass.h"
#include "core/quantize/gptq_pass.h"
#include "core/quantize/grid_weights.h"
#include "core/quantize/imatrix_collector.h"
#include "core/quantize/imatrix_mse_pass.h"
#include "core/quantize/layer_checkpoint.h"
#include "core/quantize/layer_quantizer.h"
#include "core/quantize/linear_export_data.h"
#include "core/quantize/reload.h"
#include "core/quantize/rotation_training.h"
#include "core/quantize/scaling_pass.h"
#include "core/quantize/weight_spill.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/tokenizer.h"
#include "core/runtime/compute_device.h"
#include "core/runtime/expert_streaming.h"
#include "core/runtime/mxfp4_expert_source.h"

namespace quark::quantize_internal {

using Clock = std::chrono::steady_clock;
using quantize::CalibratedParams;
using quantize::GptqPass;
using quantize::ResolveGptqDefaults;
using quantize::ScalingPass;
using quantize::WeightSpill;
using quantize::ExpertWeightSpill;
using quantize::LayerQuantizer;
using quantize::QuantLinear;

// Seconds since `since`.
inline double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Fractions of the whole run per phase, for the progress bar.
constexpr double kEvalShare = 0.1;

class QuantizeRun {
 public:
  QuantizeRun(std::string model_dir, const QuantizeModelOptions& options, runtime::ComputeDevice device)
      : model_dir_(std::move(model_dir)), options_(options), device_(std::move(device)), start_(Clock::now()) {}

  absl::StatusOr<QuantizeModelReport> Run();
  // ppl_before alone: the device, the model's config, the evaluation text, the float pass (MeasureFloatPerplexity).
  absl::StatusOr<double> MeasureFloatPerplexity();

 private:
  absl::Status PrepareDevice();
  absl::Status LoadEvaluationText();
  absl::StatusOr<double> EvaluateFloat();
  // The model folder's LayerStreamer on the run's device; with expert_group_size its routed experts stream in groups,
  // reading `replaced`'s tensors (GPTQ's expert weights) in place of the checkpoint's.
  absl::StatusOr<std::unique_ptr<runtime::LayerStreamer>> OpenCheckpointStreamer(
      const runtime::StreamerOptions& options, std::shared_ptr<const runtime::WeightSource> replaced = nullptr) const;
  absl::Status Prepare();
  absl::Status CheckExpertGroupSize(const LayerPlan& plan) const;  // #32 item 5: RTN schemes and GPTQ only
  absl::Status PrepareAlgorithms(const LayerPlan& plan);
  bool NeedsCalibration() const;
  absl::Status LoadInputs();
  absl::Status TrainRotation();  // #35 item 4: a trainable rotation entry, on the calibration windows
  absl::StatusOr<double> Evaluate(runtime::LayerStreamer& streamer, const runtime::LayerHooks& hooks, const char* phase,
                                  double base);
  absl::Status QuantizeLayers();
  // The rotation's r4: down_proj of `layer` behind its online Hadamard (nothing without r4).
  absl::Status InstallR4(runtime::DecoderLayer& layer) const;
  absl::Status OpenCheckpoint();
  absl::Status CalibrateLayer(int64_t index, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs);
  absl::Status RestoreLayer(int64_t index, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs);
  absl::Status FinishLayer(int64_t index, runtime::DecoderLayer& layer);
  absl::Status EvaluateAfter();
  absl::Status CheckAccuracyGate() const;
  void Progress(const std::string& phase, int layer, double fraction, double eta, const std::string& message) const;
  // The quantize phase spans [base, base + span] of the run (the evaluations take the rest), each layer an equal
  // share of it.
  double LayerShare() const {
    const double base = eval_ids_.empty() ? 0 : kEvalShare;
    return (1 - 3 * base) / static_cast<double>(model_.num_hidden_layers);
  }
  double LayerStart(int64_t index) const {
    return (eval_ids_.empty() ? 0 : kEvalShare) + LayerShare() * static_cast<double>(index);
  }
  void Notice(const std::string& phase, int layer, const std::string& message) const;
  // Raises the report's device memory figures (device_memory_*_bytes) to what `streamer` needed.
  void NoteDeviceMemory(const runtime::LayerStreamer& streamer);

  // Every streamer of the run (calibration, evaluation, read-back) computes on the run's device.
  runtime::StreamerOptions OnDevice() const {
    runtime::StreamerOptions options;
    options.device = device_;
    options.compute_dtype = compute_dtype_;
    options.device_memory_budget = device_memory_budget_;
    return options;
  }
  // The quantizing streamer's: OnDevice() and what the passes hold beside each layer (quantize/pass_memory.h).
  runtime::StreamerOptions Quantizing() const;

  std::string model_dir_;
  const QuantizeModelOptions options_;  // a copy: the run owns what it reads
  const runtime::ComputeDevice device_;
  at::ScalarType compute_dtype_ = at::kFloat;  // QuantizeModelOptions::compute_dtype, checked by Prepare
  int64_t device_memory_budget_ = 0;           // QuantizeModelOptions::device_memory_budget or its default, by Prepare
  int64_t search_batch_bytes_ = 0;             // QuantizeModelOptions::search_batch_bytes resolved, by Prepare
  Clock::time_point start_;
  checkpoint::ModelConfig model_;
  checkpoint::ModelConfig runtime_model_;  // model_, or as the rotation describes it (untied embeddings)
  Config config_;  // options_.config with the algorithms' defaults resolved for this model (what the export records)
  // The model as the rotation algo_config entry (always the first) sees it; null without one.
  std::shared_ptr<algorithms::RotatedWeightSource> rotated_;
  // #35 item 4: set for a trainable rotation entry; TrainRotation replaces rotated_ (the Hadamard start, built first
  // so a size without a rotation fails up front) with the trained one.
  std::unique_ptr<quantize::RotationTraining> rotation_training_;
  std::unique_ptr<ScalingPass> scaling_;  // smooth / autosmoothquant / awq, in algo_config order
  std::unique_ptr<GptqPass> gptq_;
  // #37 item 4: a GGUF by llama.cpp's rules with GPTQ among the algorithms: GPTQ rounds to its K-quant types and
  // hands the writer its blocks here.
  bool kquant_gptq_ = false;
  std::shared_ptr<exporter::gguf::PreEncodedTensors> pre_encoded_;
  std::unique_ptr<quantize::AutoRoundPass> autoround_;  // #35: rounds in GPTQ's place
  std::unique_ptr<quantize::ImatrixMsePass> imatrix_mse_;  // #35: imatrix_mse weight parameters, else null
  std::unique_ptr<WeightSpill> spill_;  // the algorithms' weights for the fake-quantized evaluation
  // #32 item 5: GPTQ's weights of routed experts streamed in groups (the streamer reads them; spill_ leaves them out).
  std::shared_ptr<ExpertWeightSpill> expert_spill_;
  // The layer's tensors as the algorithms left them (what the export writes instead of the checkpoint's).
  std::shared_ptr<runtime::TensorMapWeightSource> edited_;
  std::unique_ptr<LayerQuantizer> quantizer_;
  // The exports this run writes, fed together as each layer finishes; hf_ is the HF-quark one among them (its
  // quantization_config is the report's, its folder is reloaded for ppl_reloaded).
  struct Export {
    std::string format;
    std::string path;
    std::unique_ptr<exporter::ModelExporter> exporter;
  };
  std::vector<Export> exports_;
  exporter::HfQuarkExporter* hf_ = nullptr;
  absl::Status CreateExports(const LayerPlan& plan);
  std::unique_ptr<runtime::Tokenizer> tokenizer_;
  std::vector<int64_t> eval_ids_;
  std::vector<at::Tensor> samples_;
  std::unique_ptr<runtime::LayerStreamer> streamer_;
  std::vector<std::shared_ptr<QuantLinear>> current_;  // the layer being quantized
  // What the layer being quantized leaves for a resumed run: the tensors the algorithms changed (full names) and
  // their log lines.
  std::map<std::string, at::Tensor> layer_tensors_;
  std::vector<std::string> layer_log_;
  std::unique_ptr<quantize::LayerCheckpoint> checkpoint_;  // null without options_.checkpoint_dir
  // The calibration pass's importance matrix (options_.gguf_imatrix_from_calibration), else null.
  std::unique_ptr<quantize::ImatrixCollector> imatrix_;
  absl::Status WriteImatrix(const std::string& gguf_path);
  // #37 item 4: a GGUF by llama.cpp's rules (no engine scheme), and the types its writer planned (AWQ simulates them).
  bool llama_cpp_rules_ = false;
  std::map<std::string, exporter::gguf::GgmlType> gguf_types_;
  int64_t resume_layers_ = 0;  // layers restored from the checkpoint instead of quantized
  CalibratedParams params_;
  Clock::time_point quantize_start_;
  QuantizeModelReport report_;
};

}  // namespace quark::quantize_internal
