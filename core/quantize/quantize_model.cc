#include "core/quantize/quantize_model.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "core/base/status_macros.h"
#include "core/config/online_rotation.h"
#include "core/export/ct_checker.h"
#include "core/quantize/pass_memory.h"
#include "core/quantize/quantize_run.h"
#include "core/runtime/device_memory.h"

namespace quark {
namespace quantize_internal {
namespace {

bool InDecoderLayer(const checkpoint::ModelConfig& model, const std::string& name) {
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    if (name.rfind(checkpoint::LayerPrefix(model, i), 0) == 0) return true;
  }
  return false;
}

// R4's online Hadamard sits between up_proj and down_proj: a smoothing pair whose scales would have to pass through
// it (down_proj's input channels are Hadamard mixtures, no per-channel scale of up_proj's rows reaches them) is
// refused, naming the pair.
absl::Status ScalingThroughR4(const AlgoConfig& algo, const std::string& path) {
  const std::vector<ScalingLayer>* layers = nullptr;
  if (const auto* a = std::get_if<AwqAlgo>(&algo)) layers = &a->scaling_layers;
  if (const auto* a = std::get_if<SmoothQuantAlgo>(&algo)) layers = &a->scaling_layers;
  if (const auto* a = std::get_if<AutoSmoothQuantAlgo>(&algo)) layers = &a->scaling_layers;
  if (layers == nullptr) return absl::OkStatus();
  for (size_t i = 0; i < layers->size(); ++i) {
    for (const std::string& layer : (*layers)[i].layers) {
      if (absl::EndsWith(layer, "down_proj")) {
        return absl::InvalidArgumentError(StrCat(path, ".scaling_layers[", i, "]: ", (*layers)[i].prev_op, " -> ",
                                                 layer, " cannot be smoothed under the rotation's r4 (down_proj's "
                                                 "input is rotated online by a Hadamard; leave this pair out)"));
      }
    }
  }
  return absl::OkStatus();
}

// An exporter's refusal, prefixed with the export_formats entry it came from (#30: the job names the format).
absl::Status Prefixed(const absl::Status& s, const std::string& prefix) {
  return absl::Status(s.code(), prefix + std::string(s.message()));
}

}  // namespace

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

absl::Status QuantizeRun::PrepareDevice() {
  absl::StatusOr<at::ScalarType> dtype = runtime::ResolveComputeDtype(options_.compute_dtype, "compute_dtype");
  if (!dtype.ok()) return dtype.status();
  compute_dtype_ = *dtype;
  // Read once, before any layer takes device memory: every streamer of the run holds to the same budget.
  absl::StatusOr<int64_t> budget =
      runtime::DeviceMemoryBudget(device_, options_.device_memory_budget, "device_memory_budget");
  if (!budget.ok()) return budget.status();
  device_memory_budget_ = *budget;
  absl::StatusOr<int64_t> search_batch = quantize::SearchBatchBytes(options_.search_batch_bytes, device_.device());
  if (!search_batch.ok()) return search_batch.status();
  search_batch_bytes_ = *search_batch;
  auto model = checkpoint::LoadModelConfig(model_dir_);
  if (!model.ok()) return model.status();
  model_ = *std::move(model);
  return absl::OkStatus();
}

absl::Status QuantizeRun::CheckExpertGroupSize(const LayerPlan& plan) const {
  if (options_.expert_group_size < 0) {
    return absl::InvalidArgumentError(
        StrCat("expert_group_size: ", options_.expert_group_size, " must be >= 0 (0 = the whole layer in memory)"));
  }
  if (options_.expert_group_size == 0) return absl::OkStatus();
  // The scaling algorithms' statistics and edits, AutoRound, the rotations and imatrix_mse's searched parameters are
  // per-linear state across the whole layer: streaming its experts would reload what they changed. GPTQ quantizes
  // the streamed experts expert by expert (gptq_layer.h) and keeps their weights on disk (ExpertWeightSpill).
  const auto& algos = options_.config.algo_config;
  for (size_t i = 0; i < algos.size(); ++i) {
    const auto* gptq = std::get_if<GptqAlgo>(&algos[i]);
    if (gptq != nullptr && gptq->method == HessianMethod::kGptq && algos.size() == 1) continue;
    return absl::InvalidArgumentError(StrCat(
        "expert_group_size: experts streamed in groups run RTN schemes or GPTQ alone, but algo_config[", i, "] is ",
        AlgoName(algos[i]), algos.size() > 1 && gptq != nullptr ? " beside other algorithms" : "",
        ": set expert_group_size to 0 (the whole layer in memory)"));
  }
  if (!algos.empty() && kquant_gptq_) {
    return absl::InvalidArgumentError("expert_group_size: K-quant-aware GPTQ (a GGUF by llama.cpp's rules) keeps every "
                                      "expert's blocks in memory: set expert_group_size to 0");
  }
  if (!algos.empty() && !options_.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(StrCat(
        "expert_group_size: GPTQ's weights of experts streamed in groups stay in a scratch folder of the run, not in "
        "the layer checkpoint (checkpoint_dir \"", options_.checkpoint_dir, "\"): run without a checkpoint, or set "
        "expert_group_size to 0"));
  }
  if (quantize::UsesImatrixMse(plan)) {
    return absl::InvalidArgumentError("expert_group_size: experts streamed in groups run RTN schemes only, but the "
                                      "weights observe with imatrix_mse: set expert_group_size to 0");
  }
  return absl::OkStatus();
}

absl::Status QuantizeRun::Prepare() {
  Progress("prepare", 0, 0, 0, "validating the config against the model");
  if (auto s = PrepareDevice(); !s.ok()) return s;
  auto modules = ListModelModules(model_dir_);
  if (!modules.ok()) return modules.status();
  // A GGUF of the float model by llama.cpp's rules (a --gguf-type and no scheme; rotation, SmoothQuant or AWQ of the
  // float weights first) has no Config to validate (core/config/llama_cpp_rules.h).
  Config scheme_only = options_.config;
  scheme_only.algo_config.clear();
  llama_cpp_rules_ = QuantizesByLlamaCppRules(scheme_only != Config{}, options_.gguf_type, options_.export_formats);
  if (llama_cpp_rules_) {
    QUARK_RETURN_IF_ERROR(CheckAlgorithmsBeforeLlamaCppRules(
        options_.config.algo_config, [](size_t i) { return StrCat("algo_config[", i, "]"); }, "a scheme",
        /*allow_kquant_rounding=*/true));
    kquant_gptq_ = RoundsToKQuants(options_.config.algo_config);
  } else if (auto s = ValidationStatus(ValidateConfig(options_.config, &*modules)); !s.ok()) {
    return s;
  }
  LayerPlan plan = BuildLayerPlan(options_.config, *modules);
  if (auto s = CheckExpertGroupSize(plan); !s.ok()) return s;  // before the algorithms do any work
  if (options_.expert_group_size > 0) {
    Notice("prepare", 0, StrCat("routed experts streamed in groups of ", options_.expert_group_size,
                                " (expert_group_size): each MoE layer holds at most that many experts at once"));
  }
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
  if (scaling_ && llama_cpp_rules_ && NeedsKQuantQuantizer(config_.algo_config)) {
    // AWQ's searches simulate the GGUF's own types: the writer planned them at Create.
    if (gguf_types_.empty()) {
      return absl::FailedPreconditionError("output_dir: AWQ before llama.cpp's K-quants simulates the GGUF's types; "
                                           "it needs the GGUF export (give an output folder)");
    }
    scaling_->set_gguf_types(gguf_types_);
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
    if (HasOnlineR4(options_.config)) {
      if (auto s = CheckR4ExportFormat(f); !s.ok()) return Prefixed(s, StrCat("export_formats[", i, "]: "));
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
      for (const std::string& warning : exporter::VllmQuarkLoadWarnings(hf_->quantization_config(), model_)) {
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
      for (const std::string& warning : exporter::CtVllmLoadWarnings(
               nlohmann::json::parse((*exporter)->quantization_config().dump()))) {
        Notice("prepare", 0, StrCat("compressed_tensors export: ", warning));  // #30 item 4: MX
      }
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
        if (llama_cpp_rules_) {
          gguf.on_planned = [this](const std::string& name, exporter::gguf::GgmlType type) {
            gguf_types_[name] = type;
          };
        }
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
        gguf.pre_encoded = pre_encoded_;
        auto exporter = exporter::CreateGgufExporter(model_dir_, e.path, config_, plan, gguf);
        if (!exporter.ok()) return Prefixed(exporter.status(), StrCat("export_formats[", &format - formats.data(), "] (gguf): "));
        e.exporter = *std::move(exporter);
      } else {
        e.path = single ? root.string() : (root / "onnx").string();
        exporter::OnnxExportOptions onnx;
        onnx.untie_embeddings = untie;
        auto exporter = exporter::CreateOnnxExporter(model_dir_, e.path, config_, plan, onnx);
        if (!exporter.ok()) return Prefixed(exporter.status(), StrCat("export_formats[", &format - formats.data(), "] (onnx): "));
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
      r.r2 = rotation->r2;
      r.r4 = rotation->r4;
      // Made here, before any work: an architecture or a size without a rotation fails up front. It reads no weight
      // until the streamer asks for one.
      auto reader = checkpoint::CheckpointReader::Open(model_dir_);
      if (!reader.ok()) return reader.status();
      auto base = std::make_shared<runtime::CheckpointWeightSource>(
          std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
      auto rotated = algorithms::RotatedWeightSource::Create(base, model_, r, path);
      if (!rotated.ok()) return rotated.status();
      rotated_ = *std::move(rotated);
      if (rotation->trainable) {
        auto scheme = quantize::RotationTrainingSchemeFor(plan, model_, path);
        if (!scheme.ok()) return scheme.status();
        rotation_training_ = std::make_unique<quantize::RotationTraining>(
            quantize::RotationTraining{*rotation, r, *std::move(scheme), base, model_, path});
      }
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
      if (rotated_ && rotated_->r4().defined()) {
        if (auto s = ScalingThroughR4(algo, path); !s.ok()) return s;
      }
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
    if (kquant_gptq_) {
      // #37 item 4: GPTQ rounds to the GGUF's K-quant types; the writer takes its blocks as they are.
      if (!options_.checkpoint_dir.empty()) {
        return absl::InvalidArgumentError(
            StrCat(path, ": gptq with --gguf-type (K-quant-aware) does not resume from checkpoint_dir yet"));
      }
      pre_encoded_ = std::make_shared<exporter::gguf::PreEncodedTensors>();
      gptq_->UseKQuantTargets(pre_encoded_, !options_.gguf_imatrix.empty() || options_.gguf_imatrix_from_calibration);
    }
  }
  // #35: imatrix_mse weights (validation refused the algorithms that round or search with their own observer).
  if (quantize::UsesImatrixMse(plan)) imatrix_mse_ = std::make_unique<quantize::ImatrixMsePass>(plan);
  if (!scaling.empty()) {
    auto pass = ScalingPass::Create(scaling, plan, model_);
    if (!pass.ok()) return pass.status();
    scaling_ = *std::move(pass);
    scaling_->set_min_expert_tokens(options_.moe_min_expert_tokens);
    scaling_->set_search_batch_bytes(search_batch_bytes_);
  }
  return absl::OkStatus();
}

// Whether anything consumes activations: an algorithm, a static activation or a KV-cache scale. Weight-only RTN
// needs no forward pass over calibration data at all.
bool QuantizeRun::NeedsCalibration() const {
  if (gptq_ || autoround_ || scaling_ || imatrix_ || imatrix_mse_ || rotation_training_) return true;
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
          gptq_ || autoround_ || scaling_ || rotation_training_ ? "the algorithms" : imatrix_ ? "the importance matrix" : "static activation / KV-cache scales",
          " needs calibration data (text, JSONL or token ids); none was given and there is no evaluation text"));
    }
    calib = options_.eval_text_file;
  }
  const bool token_ids = calib.size() > 4 && (calib.rfind(".ids") == calib.size() - 4 || calib.rfind(".tokens") == calib.size() - 7);
  if (!calib.empty() && !token_ids) {
    auto tokenizer = runtime::Tokenizer::Open(model_dir_, model_.bos_token_id, model_.eos_token_id);
    if (!tokenizer.ok()) return tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }
  if (auto s = LoadEvaluationText(); !s.ok()) return s;
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

absl::Status QuantizeRun::LoadEvaluationText() {
  if (options_.eval_text_file.empty()) return absl::OkStatus();
  if (!tokenizer_) {
    auto tokenizer = runtime::Tokenizer::Open(model_dir_, model_.bos_token_id, model_.eos_token_id);
    if (!tokenizer.ok()) return tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }
  auto text = runtime::ReadTextFile(options_.eval_text_file);
  if (!text.ok()) return text.status();
  auto ids = tokenizer_->EncodeWithBos(*text);
  if (!ids.ok()) return ids.status();
  eval_ids_ = *std::move(ids);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<runtime::LayerStreamer>> QuantizeRun::OpenCheckpointStreamer(
    const runtime::StreamerOptions& options, std::shared_ptr<const runtime::WeightSource> replaced) const {
  if (options_.expert_group_size <= 0) return runtime::LayerStreamer::Open(model_dir_, options);
  // LayerStreamer::Open's reading, with the routed experts deferred to their groups (expert_streaming.h).
  auto config = checkpoint::LoadModelConfig(model_dir_);
  if (!config.ok()) return config.status();
  auto reader = checkpoint::CheckpointReader::Open(model_dir_);
  if (!reader.ok()) return reader.status();
  auto weights = runtime::CheckpointWeightsFor(*config, std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
  auto streaming = std::make_shared<const runtime::ExpertStreamingWeights>(std::move(weights), options_.expert_group_size,
                                                                           device_, std::move(replaced));
  return runtime::LayerStreamer::Create(*std::move(config), std::move(streaming), options);
}

absl::StatusOr<double> QuantizeRun::EvaluateFloat() {
  auto float_streamer = OpenCheckpointStreamer(OnDevice());
  if (!float_streamer.ok()) return float_streamer.status();
  return Evaluate(**float_streamer, {}, "evaluate_float", 0);
}

absl::StatusOr<double> QuantizeRun::MeasureFloatPerplexity() {
  if (options_.eval_text_file.empty()) {
    return absl::InvalidArgumentError("eval_text_file: the float perplexity needs evaluation text");
  }
  if (auto s = PrepareDevice(); !s.ok()) return s;
  if (auto s = LoadEvaluationText(); !s.ok()) return s;
  return EvaluateFloat();
}

absl::Status QuantizeRun::TrainRotation() {
  if (!rotation_training_) return absl::OkStatus();
  const quantize::RotationTraining& t = *rotation_training_;
  const int64_t steps = t.entry.max_steps;
  Notice("rotation", 0, StrCat(t.path, ": training R1", t.entry.r2 ? " and R2" : "", " (Cayley SGD, ", steps,
                               " steps, learning_rate ", t.entry.learning_rate, ") on ", samples_.size(),
                               " calibration windows"));
  const auto train_start = Clock::now();
  const auto progress = [&](const algorithms::RotationTrainingStep& s) {
    // The training comes before the layers: the run's fraction stays 0; the message counts the steps.
    const double done = static_cast<double>(s.step) / static_cast<double>(steps);
    const double eta = Seconds(train_start) * (1 - done) / done;
    Progress("rotation", 0, 0, eta, absl::StrFormat("rotation step %d/%d: loss %.4f", s.step, steps, s.loss));
  };
  algorithms::LearnedRotation learned;
  auto fold = quantize::TrainEntryRotation(t, samples_, progress, &learned);
  if (!fold.ok()) return fold.status();
  auto rotated = algorithms::RotatedWeightSource::Create(t.weights, model_, *fold, t.path);
  if (!rotated.ok()) return rotated.status();
  rotated_ = *std::move(rotated);
  // Each step's loss is of its own batch of windows: the first and last tenth of the steps, averaged, show the trend.
  const size_t tenth = std::max<size_t>(1, learned.steps.size() / 10);
  const auto mean_loss = [&](size_t from) {
    double sum = 0;
    for (size_t i = from; i < from + tenth; ++i) sum += learned.steps[i].loss;
    return sum / static_cast<double>(tenth);
  };
  const double first = mean_loss(0), last = mean_loss(learned.steps.size() - tenth);
  report_.metrics["rotation_train_seconds"] = learned.seconds;
  report_.metrics["rotation_loss_first"] = first;
  report_.metrics["rotation_loss_last"] = last;
  // No timing in the log: a resumed run retrains and must log what the run it resumes logged.
  report_.algorithm_log.push_back(absl::StrFormat(
      "%s rotation: trained R1%s for %d steps, quantized loss (mean of the first / last tenth of the steps) %.4f -> %.4f",
      t.path, t.entry.r2 ? " and R2" : "", steps, first, last));
  Notice("rotation", 0, report_.algorithm_log.back());
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
  NoteDeviceMemory(streamer);
  return result->ppl;
}

void QuantizeRun::NoteDeviceMemory(const runtime::LayerStreamer& streamer) {
  if (device_.is_cpu()) return;
  // What the run's streamers (quantization and every evaluation) needed of the device by the budget's formula: the
  // estimator's figure to check, and the smallest budget this run fits.
  const runtime::LayerStreamer::MemoryUse& use = streamer.memory_use();
  auto raise = [this](const char* metric, int64_t bytes) {
    double& m = report_.metrics[metric];
    m = std::max(m, static_cast<double>(bytes));
  };
  raise("device_memory_peak_bytes", use.peak_need);
  raise("device_memory_all_on_device_bytes", use.peak_need_on_device);
  raise("device_memory_least_budget_bytes", use.least_budget);
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
  if (auto s = TrainRotation(); !s.ok()) return s;
  if ((gptq_ || autoround_ || scaling_ || rotated_) && !eval_ids_.empty()) {
    auto spill = WeightSpill::Create();
    if (!spill.ok()) return spill.status();
    spill_ = *std::move(spill);
  }
  report_.metrics["num_layers"] = static_cast<double>(model_.num_hidden_layers);
  if (!eval_ids_.empty()) {
    const auto eval_start = Clock::now();
    const std::optional<double> known = options_.known_float_ppl ? options_.known_float_ppl() : std::nullopt;
    if (known) {
      report_.metrics["ppl_before"] = *known;
      report_.metrics["float_ppl_shared"] = 1;
    } else {
      // A wait for a shared figure that a cancel ended: no float pass for a job that stops.
      if (options_.cancelled && options_.cancelled()) {
        return absl::CancelledError("cancelled before the float evaluation");
      }
      auto before = EvaluateFloat();
      if (!before.ok()) return before.status();
      report_.metrics["ppl_before"] = *before;
      if (options_.on_float_ppl) options_.on_float_ppl(*before);
    }
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

}  // namespace quantize_internal

using quantize_internal::QuantizeRun;

absl::StatusOr<QuantizeModelReport> QuantizeModel(const std::string& model_dir, const QuantizeModelOptions& options) {
  absl::StatusOr<runtime::ComputeDevice> device = runtime::ComputeDevice::Open(options.device, "device");
  if (!device.ok()) return device.status();
  return QuantizeModelOn(*device, model_dir, options);
}

absl::StatusOr<double> MeasureFloatPerplexity(const std::string& model_dir, const QuantizeModelOptions& options) {
  absl::StatusOr<runtime::ComputeDevice> device = runtime::ComputeDevice::Open(options.device, "device");
  if (!device.ok()) return device.status();
  try {
    QuantizeRun run(model_dir, options, *device);
    return run.MeasureFloatPerplexity();
  } catch (const std::exception& error) {
    return absl::InternalError(StrCat("float perplexity of ", model_dir, ": ", error.what()));
  }
}

absl::StatusOr<QuantizeModelReport> QuantizeModelOn(const runtime::ComputeDevice& device, const std::string& model_dir,
                                                    const QuantizeModelOptions& options) {
  try {
    QuantizeRun run(model_dir, options, device);
    return run.Run();
  } catch (const std::exception& error) {
    // LibTorch throws; the engine's edge turns it into a Status (a daemon never dies of a bad request).
    return absl::InternalError(StrCat("quantize ", model_dir, ": ", error.what()));
  }
}

}  // namespace quark
