#include "core/quantize/quantize_run.h"

#include "core/quantize/pass_memory.h"
#include "core/runtime/online_hadamard_linear.h"

namespace quark::quantize_internal {
namespace {

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
// `imatrix_mse`: some weight observes with imatrix_mse, which the Quark JSON names by its MinMax class (#35).
absl::StatusOr<std::string> CheckpointFingerprint(const std::string& model_dir, const QuantizeModelOptions& options,
                                                  bool imatrix_mse) {
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
  const bool portable = !options.checkpoint_identity.empty();
  nlohmann::ordered_json fingerprint = {
      {"model_dir", portable ? options.checkpoint_identity : model_dir},
      {"model_files", portable ? nlohmann::ordered_json::array() : files},
      {"config", ConfigToQuarkJson(options.config)},
      {"export_formats", options.export_formats},
      {"gguf_type", options.gguf_type},
      {"num_calibration_samples", options.num_calibration_samples},
      {"seq_len", options.seq_len},
      {"moe_min_expert_tokens", options.moe_min_expert_tokens},
      {"seed", options.seed},
      {"max_shard_bytes", options.max_shard_bytes},
      {"output_dir", portable ? std::string() : options.output_dir},
      {"threads", at::get_num_threads()}};
  if (imatrix_mse) fingerprint["weight_observer"] = "imatrix_mse";
  if (options.compute_dtype != "f32") fingerprint["compute_dtype"] = options.compute_dtype;  // resume never mixes
  // The calibration text; the evaluation text stands in for it when none is given (see LoadInputs).
  const std::string& calibration = options.calibration_file.empty() ? options.eval_text_file : options.calibration_file;
  if (!calibration.empty()) {
    auto digest = FileDigest(calibration);
    if (!digest.ok()) return digest.status();
    fingerprint["calibration"] = {{"path", portable ? std::string() : calibration}, {"digest", *digest}};
  }
  return fingerprint.dump();
}

}  // namespace

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
  if (imatrix_mse_) {  // #35: parameters only; GPTQ and AutoRound never meet it (validation refuses them)
    Progress("quantize", static_cast<int>(index) + 1, start, eta, StrCat("imatrix_mse ", layer.prefix()));
    auto observed = imatrix_mse_->Run(layer, inputs, streamer_->model());
    if (!observed.ok()) return observed.status();
    known = *std::move(observed);
  }
  if (gptq_) {
    algorithms::GptqLayerCallbacks callbacks;
    callbacks.cancelled = options_.cancelled;
    callbacks.on_coverage = [&](const std::vector<runtime::ExpertCoverage>& c) { coverage = c; };
    const std::string_view algo_name = AlgoName(AlgoConfig(gptq_->algo()));  // gptq, gptaq or qronos
    callbacks.on_module = [&](const std::string& module, int i, int total) {
      Progress("quantize", static_cast<int>(index) + 1, start + layer_share * i / std::max(total, 1), eta,
               StrCat(algo_name, " ", module));
    };
    auto gptq = gptq_->Run(layer, inputs, streamer_->model(), callbacks);
    if (!gptq.ok()) return gptq.status();
    known = *std::move(gptq);
    // K-quant-aware GPTQ: its weights go to the export (whose writer takes their blocks) and the evaluation as the
    // scaling algorithms' tensors do.
    for (auto& [name, tensor] : gptq_->TakeKQuantWeights()) {
      if (!edited_) edited_ = std::make_shared<runtime::TensorMapWeightSource>();
      tensor = device_.ToHost(tensor);
      edited_->Set(name, tensor);
      scaled_tensors[name] = std::move(tensor);
    }
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
    // imatrix_mse fixes the parameters of the float weight the streamer reads again: nothing to record. A streamed
    // expert's GPTQ weight is in expert_spill_, which the streamer reads: holding it here would hold every expert.
    if (!imatrix_mse_ && !q->streamed()) layer_tensors_[q->name() + ".weight"] = device_.ToHost(q->weight());
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
  if (gptq_) {
    if (auto s = gptq_->Advance(layer, inputs, streamer_->model()); !s.ok()) return s;  // gptaq/qronos float stream
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
  if (auto s = checkpoint_->Write(index, checkpoint); !s.ok()) return s;
  if (options_.on_layer_checkpointed) options_.on_layer_checkpointed(index + 1);
  return absl::OkStatus();
}

absl::Status QuantizeRun::OpenCheckpoint() {
  if (options_.checkpoint_dir.empty()) return absl::OkStatus();
  auto fingerprint = CheckpointFingerprint(model_dir_, options_, imatrix_mse_ != nullptr);
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

// #35 item 4: with the rotation's r4, down_proj's weight is W H / sqrt(n) (RotatedWeightSource) and its input is
// multiplied by H / sqrt(n) online, in front of whatever linear (float, observed, quantized) takes the slot.
absl::Status QuantizeRun::InstallR4(runtime::DecoderLayer& layer) const {
  if (!rotated_ || !rotated_->r4().defined()) return absl::OkStatus();
  return runtime::InstallOnlineHadamard(layer, "mlp.down_proj", rotated_->r4());
}

runtime::StreamerOptions QuantizeRun::Quantizing() const {
  runtime::StreamerOptions options = OnDevice();
  const quantize::PassMemoryOptions passes = quantize::PassMemoryOptionsFor(
      options_.config, compute_dtype_, device_.device(), options_.expert_group_size, search_batch_bytes_);
  options.pass_memory = [this, passes](const runtime::DecoderLayer& layer, int64_t tokens) -> int64_t {
    return quantizer_ ? quantize::PassDeviceMemory(layer, quantizer_->plan(), passes, tokens) : 0;
  };
  options.pass_bytes_per_token = [this, passes](const runtime::DecoderLayer& layer) -> int64_t {
    return quantizer_ ? quantize::PassDeviceBytesPerToken(model_, layer, quantizer_->plan(), passes) : 0;
  };
  options.training_forward = passes.autoround;
  return options;
}

absl::Status QuantizeRun::QuantizeLayers() {
  absl::StatusOr<std::unique_ptr<runtime::LayerStreamer>> streamer;
  if (rotated_) {
    // Every later reader (calibration, the algorithms, the export, the evaluation) sees the rotated model.
    runtime_model_ = rotated_->model();
    streamer = runtime::LayerStreamer::Create(runtime_model_, rotated_, Quantizing());
  } else {
    runtime_model_ = model_;
    if (gptq_ && options_.expert_group_size > 0) {
      auto spill = ExpertWeightSpill::Create();
      if (!spill.ok()) return spill.status();
      expert_spill_ = *std::move(spill);
      gptq_->set_expert_spill(expert_spill_);
    }
    streamer = OpenCheckpointStreamer(Quantizing(), expert_spill_);  // experts streamed in groups with G
  }
  if (!streamer.ok()) return streamer.status();
  streamer_ = *std::move(streamer);
  runtime::LayerHooks hooks;
  // The importance matrix observes the forward that computes the layer's outputs (through the layer as quantized).
  hooks.before = [this](int64_t i, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
    if (auto s = InstallR4(layer); !s.ok()) return s;
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
  NoteDeviceMemory(*streamer_);
  if (!device_.is_cpu()) {
    const runtime::LayerStreamer::MemoryUse& use = streamer_->memory_use();
    report_.metrics["layers_activations_on_host"] = static_cast<double>(use.layers_activations_on_host);
    if (use.layers_activations_on_host > 0) {
      Notice("quantize", static_cast<int>(model_.num_hidden_layers),
             absl::StrFormat("the calibration activations of %d of %d layers were kept in host memory: %.2f GB with "
                             "them on %s, device_memory_budget %.2f GB",
                             use.layers_activations_on_host, model_.num_hidden_layers, use.peak_need_on_device / 1e9,
                             device_.name(), device_memory_budget_ / 1e9));
    }
  }
  if (expert_spill_) {
    report_.metrics["expert_spill_bytes"] = static_cast<double>(expert_spill_->bytes());
    Notice("quantize", static_cast<int>(model_.num_hidden_layers),
           absl::StrFormat("GPTQ's weights of %d streamed expert linears kept in %s: %.2f GB (%d as codes)",
                           expert_spill_->tensors(), expert_spill_->Location(), expert_spill_->bytes() / 1e9,
                           expert_spill_->grid_tensors()));
  }
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
      // The tokenizer beside the GGUF: `quark eval --model model.gguf --text` encodes with it (checked there against
      // the GGUF's own vocabulary). tokenizer.model when the GGUF took it, else the tokenizer.json files.
      const std::filesystem::path source(model_dir_), target = std::filesystem::path(e.path).parent_path();
      std::error_code ec;
      const bool sentencepiece = std::filesystem::exists(source / "tokenizer.model", ec);
      for (const char* name : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json"}) {
        if (sentencepiece != (std::string(name) == "tokenizer.model")) continue;
        if (!std::filesystem::exists(source / name, ec) || std::filesystem::exists(target / name, ec)) continue;
        std::filesystem::copy_file(source / name, target / name, ec);
        if (ec) return absl::InternalError(StrCat((target / name).string(), ": ", ec.message()));
        report_.files.push_back(name);
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
    if (!linears.ok()) return linears.status();
    return InstallR4(layer);
  };
  // The streamer that quantized the model, or, after GPTQ, one whose weights are GPTQ's (the checkpoint has the
  // float ones).
  runtime::LayerStreamer* quantized = streamer_.get();
  std::unique_ptr<runtime::LayerStreamer> with_gptq_weights;
  if (spill_) {
    auto overlay = spill_->Overlay(streamer_->host_weights());
    if (!overlay.ok()) return overlay.status();
    std::shared_ptr<const runtime::WeightSource> weights = *std::move(overlay);
    if (expert_spill_) {
      // The experts stream in groups here too; the overlay's base (the quantizing streamer's) reads GPTQ's weights.
      weights = std::make_shared<const runtime::ExpertStreamingWeights>(std::move(weights), options_.expert_group_size,
                                                                        device_);
    }
    auto streamer = runtime::LayerStreamer::Create(runtime_model_, std::move(weights), OnDevice());
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
  // #30 item 2: the compressed-tensors export read back as `quark eval` reads it (CtWeightSource).
  for (const auto& e : exports_) {
    if (e.format != "compressed_tensors") continue;
    auto reloaded = quantize::OpenQuantizedExport(e.path, OnDevice());
    if (!reloaded.ok()) return reloaded.status();
    auto ppl = Evaluate(*reloaded->streamer, reloaded->hooks, "evaluate_reloaded", 1 - kEvalShare);
    if (!ppl.ok()) return ppl.status();
    report_.metrics["ppl_compressed_tensors"] = *ppl;
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
  for (const std::string label : {"after", "reloaded", "gguf", "compressed_tensors"}) {  // ppl_<label>
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

}  // namespace quark::quantize_internal
