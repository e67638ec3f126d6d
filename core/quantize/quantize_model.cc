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
#include "core/quantize/gptq_pass.h"
#include "core/quantize/autoround_pass.h"
#include "core/quantize/grid_weights.h"
#include "core/quantize/imatrix_collector.h"
#include "core/quantize/layer_checkpoint.h"
#include "core/quantize/layer_quantizer.h"
#include "core/quantize/linear_export_data.h"
#include "core/quantize/reload.h"
#include "core/quantize/scaling_pass.h"
#include "core/quantize/weight_spill.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/tokenizer.h"
#include "core/runtime/compute_device.h"

namespace quark {
namespace {

using Clock = std::chrono::steady_clock;
using quantize::CalibratedParams;
using quantize::GptqPass;
using quantize::ResolveGptqDefaults;
using quantize::ScalingPass;
using quantize::WeightSpill;
using quantize::LayerQuantizer;
using quantize::QuantLinear;

bool InDecoderLayer(const checkpoint::ModelConfig& model, const std::string& name) {
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    if (name.rfind(checkpoint::LayerPrefix(model, i), 0) == 0) return true;
  }
  return false;
}

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// A content digest for the checkpoint fingerprint (FNV-1a, 64 bit): it tells one calibration file from another, it
// guards against no adversary (the checkpoint folder is the worker's own).
absl::StatusOr<std::string> FileDigest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("calibration_file: ", path, ": cannot open"));
  uint64_t hash = 1469598103934665603ull;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) hash = (hash ^ static_cast<unsigned char>(buffer[i])) * 1099511628211ull;
  }
  return absl::StrFormat("%016x", hash);
}

// Everything that decides the artifact's bytes, as canonical text: a checkpoint is used only by a run whose
// fingerprint is the same. The model's files by (name, size, mtime) as the worker's model cache keeps them; the
// thread count because LibTorch's reductions split work by it.
absl::StatusOr<std::string> CheckpointFingerprint(const std::string& model_dir, const QuantizeModelOptions& options) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  std::error_code ec;
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec)) {
    if (entry.is_regular_file(ec)) paths.push_back(entry.path());
  }
  if (ec) return absl::InternalError(StrCat(model_dir, ": ", ec.message()));
  std::sort(paths.begin(), paths.end());
  for (const auto& path : paths) {
    const auto mtime = std::filesystem::last_write_time(path, ec).time_since_epoch().count();
    files.push_back({path.filename().string(), std::filesystem::file_size(path, ec), mtime});
  }
  nlohmann::ordered_json fingerprint = {
      {"model_dir", model_dir},
      {"model_files", files},
      {"config", ConfigToQuarkJson(options.config)},
      {"export_formats", options.export_formats},
      {"gguf_type", options.gguf_type},
      {"num_calibration_samples", options.num_calibration_samples},
      {"seq_len", options.seq_len},
      {"moe_min_expert_tokens", options.moe_min_expert_tokens},
      {"seed", options.seed},
      {"max_shard_bytes", options.max_shard_bytes},
      {"output_dir", options.output_dir},
      {"threads", at::get_num_threads()}};
  // The calibration text; the evaluation text stands in for it when none is given (see LoadInputs).
  const std::string& calibration = options.calibration_file.empty() ? options.eval_text_file : options.calibration_file;
  if (!calibration.empty()) {
    auto digest = FileDigest(calibration);
    if (!digest.ok()) return digest.status();
    fingerprint["calibration"] = {{"path", calibration}, {"digest", *digest}};
  }
  return fingerprint.dump();
}

// Fractions of the whole run per phase, for the progress bar.
constexpr double kEvalShare = 0.1;

class QuantizeRun {
 public:
  QuantizeRun(std::string model_dir, const QuantizeModelOptions& options, runtime::ComputeDevice device)
      : model_dir_(std::move(model_dir)), options_(options), device_(std::move(device)), start_(Clock::now()) {}

  absl::StatusOr<QuantizeModelReport> Run();

 private:
  absl::Status Prepare();
  absl::Status PrepareAlgorithms(const LayerPlan& plan);
  bool NeedsCalibration() const;
  absl::Status LoadInputs();
  absl::StatusOr<double> Evaluate(runtime::LayerStreamer& streamer, const runtime::LayerHooks& hooks, const char* phase,
                                  double base);
  absl::Status QuantizeLayers();
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

  // Every streamer of the run (calibration, evaluation, read-back) computes on the run's device.
  runtime::StreamerOptions OnDevice() const {
    runtime::StreamerOptions options;
    options.device = device_;
    return options;
  }

  std::string model_dir_;
  const QuantizeModelOptions options_;  // a copy: the run owns what it reads
  const runtime::ComputeDevice device_;
  Clock::time_point start_;
  checkpoint::ModelConfig model_;
  checkpoint::ModelConfig runtime_model_;  // model_, or as the rotation describes it (untied embeddings)
  Config config_;  // options_.config with the algorithms' defaults resolved for this model (what the export records)
  // The model as the rotation algo_config entry (always the first) sees it; null without one.
  std::shared_ptr<algorithms::RotatedWeightSource> rotated_;
  std::unique_ptr<ScalingPass> scaling_;  // smooth / autosmoothquant / awq, in algo_config order
  std::unique_ptr<GptqPass> gptq_;
  std::unique_ptr<quantize::AutoRoundPass> autoround_;  // #35: rounds in GPTQ's place
  std::unique_ptr<WeightSpill> spill_;  // the algorithms' weights for the fake-quantized evaluation
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
  int64_t resume_layers_ = 0;  // layers restored from the checkpoint instead of quantized
  CalibratedParams params_;
  Clock::time_point quantize_start_;
  QuantizeModelReport report_;
};

void QuantizeRun::Progress(const std::string& phase, int layer, double fraction, double eta,
                           const std::string& message) const {
  if (!options_.on_progress) return;
  QuantizeProgress p;
  p.phase = phase;
  p.layer = layer;
  p.num_layers = static_cast<int>(model_.num_hidden_layers);
  p.fraction = std::min(1.0, std::max(0.0, fraction));
  p.eta_seconds = eta;
  p.message = message;
  options_.on_progress(p);
}

void QuantizeRun::Notice(const std::string& phase, int layer, const std::string& message) const {
  if (options_.on_notice) options_.on_notice(message);
  Progress(phase, layer, 0, 0, message);
}

absl::Status QuantizeRun::Prepare() {
  Progress("prepare", 0, 0, 0, "validating the config against the model");
  auto model = checkpoint::LoadModelConfig(model_dir_);
  if (!model.ok()) return model.status();
  model_ = *std::move(model);
  auto modules = ListModelModules(model_dir_);
  if (!modules.ok()) return modules.status();
  // A GGUF of the float model by llama.cpp's rules (a --gguf-type and no scheme) has no Config to validate.
  const bool llama_cpp_rules_only = options_.config == Config{} && !options_.gguf_type.empty() &&
                                    options_.export_formats == std::vector<std::string>{"gguf"};
  if (!llama_cpp_rules_only) {
    if (auto s = ValidationStatus(ValidateConfig(options_.config, &*modules)); !s.ok()) return s;
  }
  LayerPlan plan = BuildLayerPlan(options_.config, *modules);
  if (auto s = PrepareAlgorithms(plan); !s.ok()) return s;
  for (const LayerAssignment& a : plan.layers) {
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) continue;
    if (a.module_type == "Linear" && InDecoderLayer(model_, a.module)) continue;
    // The runtime owns the embeddings and the LM head outside the streamed layers: refuse rather than ignore.
    return absl::UnimplementedError(StrCat(a.module, " (", a.module_type, ", from ", a.SourceLabel(),
                                           "): only the linears of decoder layers are quantized in a causal LM; "
                                           "add it to exclude"));
  }
  if (!options_.output_dir.empty()) {
    if (auto s = CreateExports(plan); !s.ok()) return s;
  }
  quantizer_ = std::make_unique<LayerQuantizer>(options_.config, std::move(plan));
  quantizer_->set_min_expert_tokens(options_.moe_min_expert_tokens);
  return absl::OkStatus();
}

absl::Status QuantizeRun::CreateExports(const LayerPlan& plan) {
  std::vector<std::string> formats = options_.export_formats;
  if (formats.empty()) formats = {"hf_quark"};
  for (size_t i = 0; i < formats.size(); ++i) {
    const std::string& f = formats[i];
    if (f != "hf_quark" && f != "gguf" && f != "onnx" && f != "compressed_tensors") {
      return absl::InvalidArgumentError(
          StrCat("export_formats[", i, "]: \"", f, "\" is not hf_quark, gguf, onnx or compressed_tensors"));
    }
    if (std::count(formats.begin(), formats.end(), f) > 1) {
      return absl::InvalidArgumentError(StrCat("export_formats[", i, "]: ", f, " appears twice"));
    }
  }
  if (!options_.gguf_type.empty() && std::find(formats.begin(), formats.end(), "gguf") == formats.end()) {
    return absl::InvalidArgumentError("gguf_type: set, but gguf is not among the export formats");
  }
  if (options_.gguf_imatrix_from_calibration) {
    if (std::find(formats.begin(), formats.end(), "gguf") == formats.end()) {
      return absl::InvalidArgumentError("gguf_imatrix_from_calibration: set, but gguf is not among the export formats");
    }
    if (!options_.gguf_imatrix.empty()) {
      return absl::InvalidArgumentError(StrCat("gguf_imatrix_from_calibration: set together with gguf_imatrix \"",
                                               options_.gguf_imatrix, "\"; give one of them"));
    }
    imatrix_ = std::make_unique<quantize::ImatrixCollector>(model_);
  }
  const bool single = formats.size() == 1;
  std::error_code ec;
  if (!single) {
    if (std::filesystem::exists(options_.output_dir, ec) && !std::filesystem::is_empty(options_.output_dir, ec)) {
      return absl::AlreadyExistsError(StrCat("output_dir: ", options_.output_dir, " exists and is not an empty folder"));
    }
    std::filesystem::create_directories(options_.output_dir, ec);
    if (ec) return absl::InternalError(StrCat("output_dir: ", options_.output_dir, ": ", ec.message()));
  }
  for (const std::string& format : formats) {
    const std::filesystem::path root(options_.output_dir);
    Export e;
    e.format = format;
    if (format == "hf_quark") {
      e.path = single ? root.string() : (root / "hf_quark").string();
      exporter::HfQuarkExportOptions export_options;
      export_options.max_shard_bytes = static_cast<uint64_t>(options_.max_shard_bytes);
      export_options.untie_embeddings = rotated_ && model_.tie_word_embeddings;
      auto exporter = exporter::HfQuarkExporter::Create(model_dir_, e.path, config_, plan, export_options);
      if (!exporter.ok()) return exporter.status();
      hf_ = exporter->get();
      for (const std::string& warning : exporter::VllmQuarkLoadWarnings(hf_->quantization_config())) {
        Notice("prepare", 0, StrCat("hf_quark export: ", warning));
      }
      e.exporter = *std::move(exporter);
    } else if (format == "compressed_tensors") {
      e.path = single ? root.string() : (root / "compressed_tensors").string();
      exporter::HfQuarkExportOptions export_options;
      export_options.max_shard_bytes = static_cast<uint64_t>(options_.max_shard_bytes);
      export_options.untie_embeddings = rotated_ && model_.tie_word_embeddings;
      auto exporter = exporter::CompressedTensorsExporter::Create(model_dir_, e.path, config_, plan, export_options);
      if (!exporter.ok()) return absl::Status(exporter.status().code(), StrCat("export_formats[", std::find(formats.begin(), formats.end(), format) - formats.begin(),
                                                                               "] (compressed_tensors): ",
                                                                               std::string(exporter.status().message())));
      e.exporter = *std::move(exporter);
    } else {
      // A rotation unties tied embeddings (it folds the final norm into the LM head): GGUF then writes output.weight
      // and ONNX its own lm_head, as HF-quark writes lm_head.weight.
      const bool untie = rotated_ && model_.tie_word_embeddings;
      if (format == "gguf") {
        if (single) std::filesystem::create_directories(root, ec);
        e.path = (root / "model.gguf").string();
        exporter::GgufExportOptions gguf;
        gguf.untie_embeddings = untie;
        if (!options_.gguf_type.empty()) {
          auto file_type = exporter::gguf::ParseFileType(options_.gguf_type);
          if (!file_type.ok()) return file_type.status();
          gguf.file_type = *file_type;
          gguf.pure = options_.gguf_pure;
        }
        if (!options_.gguf_imatrix.empty()) {
          auto imatrix = exporter::gguf::ReadImatrix(options_.gguf_imatrix);
          if (!imatrix.ok()) return imatrix.status();
          gguf.imatrix = std::make_shared<const exporter::gguf::ImatrixStats>(*std::move(imatrix));
        }
        if (imatrix_) gguf.imatrix = imatrix_->stats();
        auto exporter = exporter::CreateGgufExporter(model_dir_, e.path, config_, plan, gguf);
        if (!exporter.ok()) return exporter.status();
        e.exporter = *std::move(exporter);
      } else {
        e.path = single ? root.string() : (root / "onnx").string();
        exporter::OnnxExportOptions onnx;
        onnx.untie_embeddings = untie;
        auto exporter = exporter::CreateOnnxExporter(model_dir_, e.path, config_, plan, onnx);
        if (!exporter.ok()) return exporter.status();
        e.exporter = *std::move(exporter);
      }
    }
    exports_.push_back(std::move(e));
  }
  return absl::OkStatus();
}

absl::Status QuantizeRun::PrepareAlgorithms(const LayerPlan& plan) {
  config_ = options_.config;
  std::vector<std::pair<size_t, AlgoConfig>> scaling;
  for (size_t i = 0; i < config_.algo_config.size(); ++i) {
    const std::string path = StrCat("algo_config[", i, "]");
    AlgoConfig& algo = config_.algo_config[i];
    if (const auto* rotation = std::get_if<RotationAlgo>(&algo)) {
      if (i != 0) return absl::InvalidArgumentError(StrCat(path, ": rotation must be the first algorithm"));
      algorithms::RotationOptions r;
      r.random = rotation->random;
      r.seed = options_.seed;
      // Made here, before any work: an architecture or a size without a rotation fails up front. It reads no weight
      // until the streamer asks for one.
      auto reader = checkpoint::CheckpointReader::Open(model_dir_);
      if (!reader.ok()) return reader.status();
      auto base = std::make_shared<runtime::CheckpointWeightSource>(
          std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
      auto rotated = algorithms::RotatedWeightSource::Create(base, model_, r, path);
      if (!rotated.ok()) return rotated.status();
      rotated_ = *std::move(rotated);
      continue;
    }
    if (const auto* autoround = std::get_if<AutoRoundAlgo>(&algo)) {
      if (gptq_) return absl::InvalidArgumentError(StrCat(path, ": autoround after gptq rounds the same weights"));
      auto pass = quantize::AutoRoundPass::Create(*autoround, plan, model_, path);
      if (!pass.ok()) return pass.status();
      autoround_ = *std::move(pass);
      continue;
    }
    if (quantize::IsScalingAlgo(algo)) {
      if (gptq_ || autoround_) {
        return absl::InvalidArgumentError(StrCat(path, ": ", AlgoName(algo),
                                                 " must come before gptq (it rescales the float weights GPTQ rounds)"));
      }
      algo = quantize::ResolveScalingDefaults(algo, model_);
      scaling.emplace_back(i, algo);
      continue;
    }
    auto* gptq = std::get_if<GptqAlgo>(&algo);
    if (autoround_) return absl::InvalidArgumentError(StrCat(path, ": gptq after autoround rounds the same weights"));
    *gptq = ResolveGptqDefaults(*gptq, model_);
    auto pass = GptqPass::Create(*gptq, plan, model_, path);
    if (!pass.ok()) return pass.status();
    gptq_ = *std::move(pass);
    gptq_->set_min_expert_tokens(options_.moe_min_expert_tokens);
  }
  if (!scaling.empty()) {
    auto pass = ScalingPass::Create(scaling, plan, model_);
    if (!pass.ok()) return pass.status();
    scaling_ = *std::move(pass);
    scaling_->set_min_expert_tokens(options_.moe_min_expert_tokens);
  }
  return absl::OkStatus();
}

// Whether anything consumes activations: an algorithm, a static activation or a KV-cache scale. Weight-only RTN
// needs no forward pass over calibration data at all.
bool QuantizeRun::NeedsCalibration() const {
  if (gptq_ || autoround_ || scaling_ || imatrix_) return true;
  // An NVFP4 input is dynamic per group yet calibrates its global scale.
  const auto is_static = [](const std::optional<QuantSpec>& s) {
    return s && (!s->is_dynamic || s->IsNvfp4()) && !IsCastType(s->dtype);
  };
  for (const LayerAssignment& a : quantizer_->plan().layers) {
    if (a.source == ConfigSource::kExcluded) continue;
    if (is_static(a.config.input_tensors) || is_static(a.config.output_tensors)) return true;
    if (KvCacheSpecFor(options_.config, a.module)) return true;
  }
  return false;
}

absl::Status QuantizeRun::LoadInputs() {
  const bool needs_calibration = NeedsCalibration();
  std::string calib = needs_calibration ? options_.calibration_file : "";
  if (needs_calibration && calib.empty()) {
    // Random token ids calibrate nothing real: the evaluation text is the next best thing, else ask for data.
    if (options_.eval_text_file.empty()) {
      return absl::InvalidArgumentError(StrCat(
          "calibration_file: ",
          gptq_ || autoround_ || scaling_ ? "the algorithms" : imatrix_ ? "the importance matrix" : "static activation / KV-cache scales",
          " needs calibration data (text, JSONL or token ids); none was given and there is no evaluation text"));
    }
    calib = options_.eval_text_file;
  }
  const bool token_ids = calib.size() > 4 && (calib.rfind(".ids") == calib.size() - 4 || calib.rfind(".tokens") == calib.size() - 7);
  if (!options_.eval_text_file.empty() || (!calib.empty() && !token_ids)) {
    auto tokenizer = runtime::Tokenizer::Open(model_dir_, model_.bos_token_id, model_.eos_token_id);
    if (!tokenizer.ok()) return tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }
  if (!options_.eval_text_file.empty()) {
    auto text = runtime::ReadTextFile(options_.eval_text_file);
    if (!text.ok()) return text.status();
    auto ids = tokenizer_->EncodeWithBos(*text);
    if (!ids.ok()) return ids.status();
    eval_ids_ = *std::move(ids);
  }
  if (needs_calibration) {
    auto samples = quantize::LoadCalibrationSamples(calib, model_, tokenizer_.get(), options_.num_calibration_samples,
                                                    options_.seq_len, options_.seed);
    if (!samples.ok()) return samples.status();
    samples_ = *std::move(samples);
  }
  int64_t tokens = 0;
  for (const auto& s : samples_) tokens += s.numel();
  report_.metrics["num_calibration_samples"] = static_cast<double>(samples_.size());
  report_.metrics["calibration_tokens"] = static_cast<double>(tokens);
  return absl::OkStatus();
}

absl::StatusOr<double> QuantizeRun::Evaluate(runtime::LayerStreamer& streamer, const runtime::LayerHooks& hooks,
                                             const char* phase, double base) {
  Progress(phase, 0, base, 0, StrCat("perplexity over ", eval_ids_.size(), " tokens"));
  runtime::PerplexityOptions options;
  options.seq_len = options_.eval_seq_len;
  options.max_windows = options_.eval_max_windows;
  options.hooks = hooks;
  auto result = runtime::EvaluatePerplexity(streamer, eval_ids_, options);
  if (!result.ok()) return result.status();
  return result->ppl;
}

absl::Status QuantizeRun::CalibrateLayer(int64_t index, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
  if (options_.cancelled && options_.cancelled()) {
    return absl::CancelledError(StrCat("cancelled before layer ", index, " of ", model_.num_hidden_layers));
  }
  if (index < resume_layers_) return RestoreLayer(index, layer, inputs);
  const double layer_share = LayerShare();
  const double start = LayerStart(index);
  const double eta = index == 0 ? 0 : Seconds(quantize_start_) / static_cast<double>(index) *
                                          static_cast<double>(model_.num_hidden_layers - index);
  Progress("quantize", static_cast<int>(index) + 1, start, eta, StrCat("calibrating and quantizing ", layer.prefix()));
  CalibratedParams known;
  std::vector<runtime::ExpertCoverage> coverage;  // MoE: the last calibration forward's per-expert counts
  std::map<std::string, at::Tensor> scaled_tensors;
  edited_.reset();
  layer_tensors_.clear();
  layer_log_.clear();
  if (scaling_) {
    quantize::ScalingCallbacks callbacks;
    callbacks.cancelled = options_.cancelled;
    callbacks.on_step = [&](const std::string& step) {
      Progress("quantize", static_cast<int>(index) + 1, start, eta, StrCat(step, " ", layer.prefix()));
    };
    auto scaled = scaling_->Run(layer, inputs, streamer_->model(), callbacks);
    if (!scaled.ok()) return scaled.status();
    // What the scaling algorithms leave goes to the exports, the checkpoint and the spill: host memory.
    edited_ = std::make_shared<runtime::TensorMapWeightSource>();
    for (auto& [name, tensor] : scaled->tensors) {
      tensor = device_.ToHost(tensor);
      edited_->Set(name, tensor);
    }
    scaled_tensors = std::move(scaled->tensors);
    coverage = std::move(scaled->coverage);  // MoE: a scaling-only run reports its forwards' counts
    layer_log_ = std::move(scaled->summary);
    report_.algorithm_log.insert(report_.algorithm_log.end(), layer_log_.begin(), layer_log_.end());
  }
  if (gptq_) {
    algorithms::GptqLayerCallbacks callbacks;
    callbacks.cancelled = options_.cancelled;
    callbacks.on_coverage = [&](const std::vector<runtime::ExpertCoverage>& c) { coverage = c; };
    callbacks.on_module = [&](const std::string& module, int i, int total) {
      Progress("quantize", static_cast<int>(index) + 1, start + layer_share * i / std::max(total, 1), eta,
               StrCat("gptq ", module));
    };
    auto gptq = gptq_->Run(layer, inputs, streamer_->model(), callbacks);
    if (!gptq.ok()) return gptq.status();
    known = *std::move(gptq);
  }
  if (autoround_) {
    algorithms::AutoRoundCallbacks callbacks;
    callbacks.cancelled = options_.cancelled;
    auto rounded = autoround_->Run(layer, inputs, streamer_->model(), callbacks);
    if (!rounded.ok()) return rounded.status();
    known = std::move(rounded->params);
    layer_log_.push_back(rounded->summary);
    report_.algorithm_log.push_back(rounded->summary);
  }
  std::vector<runtime::ExpertCoverage> calibrated;
  auto linears = quantizer_->Calibrate(layer, inputs, streamer_->model(), &known, &calibrated);
  if (!linears.ok()) return linears.status();
  if (!calibrated.empty()) coverage = std::move(calibrated);
  quantize::AddCoverageMetrics(coverage, index, report_.metrics, &report_.algorithm_log);
  current_ = *std::move(linears);
  for (auto& [name, p] : quantize::SnapshotParams(current_)) params_[name] = std::move(p);
  if (known.empty() && !edited_) return absl::OkStatus();
  // The float tensors the scaling algorithms left (the evaluation quantizes them again with the same parameters), and
  // GPTQ's weights, which are on their grid already.
  layer_tensors_ = std::move(scaled_tensors);
  for (const auto& q : current_) {
    auto it = known.find(q->name());
    if (it == known.end()) continue;
    params_[q->name()].weight = it->second.weight;
    layer_tensors_[q->name() + ".weight"] = device_.ToHost(q->weight());
  }
  if (!spill_) return absl::OkStatus();
  return spill_->WriteLayer(index, {layer_tensors_.begin(), layer_tensors_.end()});
}

// A checkpointed layer: the float hidden states move on through the layer as loaded (the scaling algorithms' float
// model), then the layer takes the recorded tensors and parameters, and the streamer computes the quantized outputs
// from it as the first run did.
absl::Status QuantizeRun::RestoreLayer(int64_t index, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
  Progress("quantize", static_cast<int>(index) + 1, LayerStart(index), 0,
           StrCat("restoring ", layer.prefix(), " from the checkpoint"));
  auto data = checkpoint_->Read(index);
  if (!data.ok()) return data.status();
  if (auto s = quantize::ExpandGridWeights(quantizer_->plan(), *data); !s.ok()) return s;
  if (scaling_) {
    if (auto s = scaling_->Advance(layer, inputs, streamer_->model()); !s.ok()) return s;
  }
  std::map<std::string, at::Tensor> relative;
  for (const auto& [name, tensor] : data->tensors) {
    if (name.rfind(layer.prefix(), 0) != 0) {
      return absl::DataLossError(StrCat("checkpoint ", checkpoint_->dir(), ": layer ", index, " holds ", name));
    }
    relative[name.substr(layer.prefix().size())] = tensor;
  }
  if (auto s = algorithms::SetLayerTensors(layer, relative); !s.ok()) return s;
  auto linears = quantizer_->Apply(layer, data->params);
  if (!linears.ok()) return linears.status();
  current_ = *std::move(linears);
  for (const auto& [name, p] : data->params) params_[name] = p;
  edited_.reset();
  if (!data->tensors.empty()) {
    edited_ = std::make_shared<runtime::TensorMapWeightSource>();
    for (const auto& [name, tensor] : data->tensors) edited_->Set(name, tensor);
  }
  report_.algorithm_log.insert(report_.algorithm_log.end(), data->log.begin(), data->log.end());
  layer_tensors_ = data->tensors;
  layer_log_ = data->log;
  if (!spill_ || data->tensors.empty()) return absl::OkStatus();
  return spill_->WriteLayer(index, {data->tensors.begin(), data->tensors.end()});
}

absl::Status QuantizeRun::FinishLayer(int64_t index, runtime::DecoderLayer& layer) {
  // Recorded before the export releases the float weights; written after it, so that a checkpointed layer is one
  // whose exported tensors are complete.
  quantize::LayerCheckpointData checkpoint;
  if (checkpoint_ && index >= resume_layers_) {
    for (const auto& q : current_) {
      auto it = params_.find(q->name());
      if (it != params_.end()) checkpoint.params[q->name()] = it->second;
    }
    checkpoint.tensors = layer_tensors_;
    checkpoint.log = layer_log_;
    if (auto s = quantize::CompactGridWeights(quantizer_->plan(), checkpoint); !s.ok()) return s;
  }
  if (!exports_.empty()) {
    for (const auto& q : current_) {
      auto data = quantize::LinearExportDataOf(*q);
      if (!data.ok()) return data.status();
      // Elements the export rounds otherwise than the fake-quantized model (export_agreement.h): why ppl_reloaded
      // can differ from ppl_after.
      auto differing = quantize::ExportWeightDifferences(*data);
      if (!differing.ok()) return differing.status();
      report_.metrics["export_weight_differences"] += static_cast<double>(*differing);
      for (auto& e : exports_) {
        if (auto s = e.exporter->WriteLinear(*data); !s.ok()) return s;
      }
      q->ReleaseFloatWeight();
    }
    // The layer's other tensors as the algorithms left them (smoothed norms), else as the streamer reads them.
    std::vector<std::shared_ptr<const runtime::WeightSource>> edited;
    if (edited_) edited.push_back(edited_);
    const quantize::OverlayWeightSource weights(streamer_->host_weights(), std::move(edited));
    for (auto& e : exports_) {
      if (auto s = e.exporter->WriteUnquantized(layer.prefix(), weights); !s.ok()) return s;
    }
  }
  current_.clear();
  layer_tensors_.clear();
  if (!checkpoint_ || index < resume_layers_) return absl::OkStatus();
  return checkpoint_->Write(index, checkpoint);
}

absl::Status QuantizeRun::OpenCheckpoint() {
  if (options_.checkpoint_dir.empty()) return absl::OkStatus();
  auto fingerprint = CheckpointFingerprint(model_dir_, options_);
  if (!fingerprint.ok()) return fingerprint.status();
  auto checkpoint = quantize::LayerCheckpoint::Open(options_.checkpoint_dir, *std::move(fingerprint));
  if (!checkpoint.ok()) return checkpoint.status();
  checkpoint_ = *std::move(checkpoint);
  if (!checkpoint_->discarded_reason().empty()) {
    Notice("prepare", 0, StrCat("checkpoint discarded, starting at layer 0: ", checkpoint_->discarded_reason()));
  }
  resume_layers_ = checkpoint_->finished_layers();
  if (resume_layers_ > 0 && !options_.output_dir.empty()) {
    // The earlier attempt's partial export: the restored layers are exported again, byte for byte.
    std::error_code ec;
    std::filesystem::remove_all(options_.output_dir, ec);
    std::filesystem::create_directories(options_.output_dir, ec);
    if (ec) return absl::InternalError(StrCat("output_dir: ", options_.output_dir, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status QuantizeRun::QuantizeLayers() {
  absl::StatusOr<std::unique_ptr<runtime::LayerStreamer>> streamer;
  if (rotated_) {
    // Every later reader (calibration, the algorithms, the export, the evaluation) sees the rotated model.
    runtime_model_ = rotated_->model();
    streamer = runtime::LayerStreamer::Create(runtime_model_, rotated_, OnDevice());
  } else {
    runtime_model_ = model_;
    streamer = runtime::LayerStreamer::Open(model_dir_, OnDevice());
  }
  if (!streamer.ok()) return streamer.status();
  streamer_ = *std::move(streamer);
  runtime::LayerHooks hooks;
  // The importance matrix observes the forward that computes the layer's outputs (through the layer as quantized).
  hooks.before = [this](int64_t i, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
    if (auto s = CalibrateLayer(i, layer, inputs); !s.ok() || !imatrix_) return s;
    return imatrix_->Attach(layer);
  };
  hooks.after = [this](int64_t i, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&,
                       const std::vector<at::Tensor>&) {
    if (imatrix_) {
      if (auto s = imatrix_->Detach(layer); !s.ok()) return s;
    }
    return FinishLayer(i, layer);
  };
  quantize_start_ = Clock::now();
  if (resume_layers_ > 0) {
    report_.metrics["resumed_at_layer"] = static_cast<double>(resume_layers_);
    Notice("quantize", static_cast<int>(resume_layers_),
           StrCat("resumed at layer ", resume_layers_, " of ", model_.num_hidden_layers, ": layers 0-",
                  resume_layers_ - 1, " come from the checkpoint"));
  }
  auto outputs = streamer_->Run(samples_, hooks);
  if (!outputs.ok()) return outputs.status();
  int64_t chunk_size = 0;
  for (const auto& s : samples_) chunk_size = std::max<int64_t>(chunk_size, s.size(-1));
  if (imatrix_) {
    auto stats = imatrix_->stats();
    stats->chunk_count = static_cast<uint32_t>(samples_.size());
    stats->chunk_size = static_cast<uint32_t>(chunk_size);
    const std::string& data = options_.calibration_file.empty() ? options_.eval_text_file : options_.calibration_file;
    stats->datasets = {std::filesystem::path(data).filename().string()};
  }
  samples_.clear();
  report_.metrics["seconds_quantize"] = Seconds(quantize_start_);
  for (auto& e : exports_) {
    Progress("finish", static_cast<int>(model_.num_hidden_layers), 0.7, 0,
             StrCat("finishing and checking the ", e.format, " export"));
    auto files = e.exporter->Finish(*streamer_->host_weights());
    if (!files.ok()) return files.status();
    for (const std::string& file : *files) {
      report_.files.push_back(exports_.size() == 1 || e.format == "gguf" ? file : StrCat(e.format, "/", file));
    }
    if (e.format == "gguf" && imatrix_) {
      if (auto s = WriteImatrix(e.path); !s.ok()) return s;
    }
    if (e.format == "gguf") {
      // The tokenizer.model beside the GGUF: `quark eval --model model.gguf --text` encodes with it (checked there
      // against the GGUF's own vocabulary).
      const std::filesystem::path tokenizer = std::filesystem::path(model_dir_) / "tokenizer.model";
      const std::filesystem::path copy = std::filesystem::path(e.path).parent_path() / "tokenizer.model";
      std::error_code ec;
      if (std::filesystem::exists(tokenizer, ec) && !std::filesystem::exists(copy, ec)) {
        std::filesystem::copy_file(tokenizer, copy, ec);
        if (ec) return absl::InternalError(StrCat(copy.string(), ": ", ec.message()));
        report_.files.push_back("tokenizer.model");
      }
    }
  }
  report_.quantization_config = hf_ ? hf_->quantization_config() : ConfigToQuarkJson(config_);
  return absl::OkStatus();
}

// imatrix.gguf beside the GGUF (llama-imatrix's layout): llama-quantize --imatrix takes it for other file types.
absl::Status QuantizeRun::WriteImatrix(const std::string& gguf_path) {
  const std::filesystem::path path = std::filesystem::path(gguf_path).parent_path() / "imatrix.gguf";
  if (auto s = exporter::gguf::WriteImatrixGguf(*imatrix_->stats(), path.string()); !s.ok()) return s;
  report_.files.push_back("imatrix.gguf");
  return absl::OkStatus();
}

absl::Status QuantizeRun::EvaluateAfter() {
  const auto eval_start = Clock::now();
  runtime::LayerHooks fake;
  fake.before = [this](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&) {
    auto linears = quantizer_->Apply(layer, params_);
    return linears.ok() ? absl::OkStatus() : linears.status();
  };
  // The streamer that quantized the model, or, after GPTQ, one whose weights are GPTQ's (the checkpoint has the
  // float ones).
  runtime::LayerStreamer* quantized = streamer_.get();
  std::unique_ptr<runtime::LayerStreamer> with_gptq_weights;
  if (spill_) {
    auto overlay = spill_->Overlay(streamer_->host_weights());
    if (!overlay.ok()) return overlay.status();
    auto streamer = runtime::LayerStreamer::Create(runtime_model_, *std::move(overlay), OnDevice());
    if (!streamer.ok()) return streamer.status();
    with_gptq_weights = *std::move(streamer);
    quantized = with_gptq_weights.get();
  }
  auto after = Evaluate(*quantized, fake, "evaluate_quantized", 1 - 2 * kEvalShare);
  if (!after.ok()) return after.status();
  report_.metrics["ppl_after"] = *after;
  for (const auto& e : exports_) {
    if (e.format != "gguf") continue;
    // The GGUF read back through its own weight source (dequantized blocks), as `quark eval --model` reads it.
    auto source = exporter::GgufWeightSource::Open(e.path);
    if (!source.ok()) return source.status();
    auto streamer = runtime::LayerStreamer::Create((*source)->config(), *source, OnDevice());
    if (!streamer.ok()) return streamer.status();
    auto ppl = Evaluate(**streamer, {}, "evaluate_reloaded", 1 - kEvalShare);
    if (!ppl.ok()) return ppl.status();
    report_.metrics["ppl_gguf"] = *ppl;
  }
  if (hf_) {
    const auto hf = std::find_if(exports_.begin(), exports_.end(), [](const Export& e) { return e.format == "hf_quark"; });
    auto reloaded = quantize::OpenQuantizedExport(hf->path, OnDevice());
    if (!reloaded.ok()) return reloaded.status();
    auto ppl = Evaluate(*reloaded->streamer, reloaded->hooks, "evaluate_reloaded", 1 - kEvalShare);
    if (!ppl.ok()) return ppl.status();
    report_.metrics["ppl_reloaded"] = *ppl;
  }
  report_.metrics["seconds_eval"] += Seconds(eval_start);
  return absl::OkStatus();
}

absl::Status QuantizeRun::CheckAccuracyGate() const {
  if (!options_.max_ppl_increase) return absl::OkStatus();
  const auto& m = report_.metrics;
  const double before = m.at("ppl_before"), bound = *options_.max_ppl_increase;
  std::string figures = StrCat("before ", before);
  std::string worst;
  double worst_increase = -1;
  for (const std::string label : {"after", "reloaded", "gguf"}) {  // ppl_after, ppl_reloaded, ppl_gguf
    auto it = m.find("ppl_" + label);
    if (it == m.end()) continue;
    figures += StrCat(", ", label, " ", it->second);
    const double increase = it->second / before - 1.0;
    if (increase > worst_increase) {
      worst_increase = increase;
      worst = label;
    }
  }
  if (worst_increase <= bound) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat("accuracy gate: perplexity %+.1f%% > %.1f%% (%s: %s)",
                                                       100 * worst_increase, 100 * bound, worst, figures));
}

absl::StatusOr<QuantizeModelReport> QuantizeRun::Run() {
  if (options_.max_ppl_increase && (options_.eval_text_file.empty() || *options_.max_ppl_increase < 0)) {
    return absl::InvalidArgumentError(StrCat("max_ppl_increase: ", *options_.max_ppl_increase,
                                             options_.eval_text_file.empty() ? " needs evaluation text"
                                                                             : " must not be negative"));
  }
  if (auto s = OpenCheckpoint(); !s.ok()) return s;
  if (auto s = Prepare(); !s.ok()) return s;
  if (auto s = LoadInputs(); !s.ok()) return s;
  if ((gptq_ || autoround_ || scaling_ || rotated_) && !eval_ids_.empty()) {
    auto spill = WeightSpill::Create();
    if (!spill.ok()) return spill.status();
    spill_ = *std::move(spill);
  }
  report_.metrics["num_layers"] = static_cast<double>(model_.num_hidden_layers);
  if (!eval_ids_.empty()) {
    const auto eval_start = Clock::now();
    auto float_streamer = runtime::LayerStreamer::Open(model_dir_, OnDevice());
    if (!float_streamer.ok()) return float_streamer.status();
    auto before = Evaluate(**float_streamer, {}, "evaluate_float", 0);
    if (!before.ok()) return before.status();
    report_.metrics["ppl_before"] = *before;
    report_.metrics["seconds_eval"] = Seconds(eval_start);
  }
  if (auto s = QuantizeLayers(); !s.ok()) return s;
  if (!eval_ids_.empty()) {
    if (auto s = EvaluateAfter(); !s.ok()) return s;
  }
  if (auto s = CheckAccuracyGate(); !s.ok()) {
    // Nothing the gate refused stays behind: the run made output_dir, the run removes it.
    std::error_code ec;
    if (!options_.output_dir.empty()) std::filesystem::remove_all(options_.output_dir, ec);
    report_.metrics["seconds_total"] = Seconds(start_);
    if (options_.on_metrics) options_.on_metrics(report_.metrics);
    return s;
  }
  report_.metrics["seconds_total"] = Seconds(start_);
  if (options_.on_metrics) options_.on_metrics(report_.metrics);
  Progress("done", static_cast<int>(model_.num_hidden_layers), 1, 0, "done");
  return std::move(report_);
}

}  // namespace

namespace {

// What runs on a device that is not the CPU. Calibration, RTN, SmoothQuant, rotation, the evaluations and the
// read-backs give the CPU's exports byte for byte and its perplexities there (tests/quantize/device_quantize_test.cc
// on LibTorch's lazy device); GPTQ runs its tensor-operation path (bit-identical to the CPU's on CPU tensors,
// gptq_cuda_test's bounds on a GPU). AWQ's and AutoSmoothQuant's grid searches chose other grid points on that device
// than on the CPU, which is not understood yet: they stay on the CPU until it is.
absl::Status CheckAlgorithmsRunOn(const runtime::ComputeDevice& device, const Config& config) {
  if (device.is_cpu()) return absl::OkStatus();
  for (size_t i = 0; i < config.algo_config.size(); ++i) {
    if (std::holds_alternative<AwqAlgo>(config.algo_config[i]) ||
        std::holds_alternative<AutoSmoothQuantAlgo>(config.algo_config[i])) {
      return absl::FailedPreconditionError(StrCat(
          "device: ", device.name(), ": algo_config[", i, "] (", AlgoName(config.algo_config[i]),
          ") runs on the CPU only in this build (its search is not yet shown to equal the CPU's on a device; "
          "docs/gpu.md): run it with --device cpu"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QuantizeModelReport> QuantizeModel(const std::string& model_dir, const QuantizeModelOptions& options) {
  absl::StatusOr<runtime::ComputeDevice> device = runtime::ComputeDevice::Open(options.device, "device");
  if (!device.ok()) return device.status();
  return QuantizeModelOn(*device, model_dir, options);
}

absl::StatusOr<QuantizeModelReport> QuantizeModelOn(const runtime::ComputeDevice& device, const std::string& model_dir,
                                                    const QuantizeModelOptions& options) {
  if (absl::Status runs = CheckAlgorithmsRunOn(device, options.config); !runs.ok()) return runs;
  try {
    QuantizeRun run(model_dir, options, device);
    return run.Run();
  } catch (const std::exception& error) {
    // LibTorch throws; the engine's edge turns it into a Status (a daemon never dies of a bad request).
    return absl::InternalError(StrCat("quantize ", model_dir, ": ", error.what()));
  }
}

}  // namespace quark
