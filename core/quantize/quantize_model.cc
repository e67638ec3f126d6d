#include "core/quantize/quantize_model.h"

#include <chrono>
#include <memory>

#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/model_modules.h"
#include "core/config/layer_plan.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"
#include "core/export/hf_quark_writer.h"
#include "core/quantize/calibration_input.h"
#include "core/quantize/layer_quantizer.h"
#include "core/quantize/reload.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/tokenizer.h"

namespace quark {
namespace {

using Clock = std::chrono::steady_clock;
using quantize::CalibratedParams;
using quantize::LayerQuantizer;
using quantize::QuantLinear;

bool InDecoderLayer(const checkpoint::ModelConfig& model, const std::string& name) {
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    if (name.rfind(checkpoint::LayerPrefix(model, i), 0) == 0) return true;
  }
  return false;
}

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Fractions of the whole run per phase, for the progress bar.
constexpr double kEvalShare = 0.1;

exporter::LinearExportData ExportDataOf(const QuantLinear& q) {
  exporter::LinearExportData data;
  data.module = q.name();
  data.config = q.config();
  data.weight = q.weight();
  data.bias = q.bias();
  if (q.input_quantizer() && q.input_quantizer()->params()) data.input_params = *q.input_quantizer()->params();
  if (q.output_quantizer() && q.output_quantizer()->params()) data.output_params = *q.output_quantizer()->params();
  return data;
}

class QuantizeRun {
 public:
  QuantizeRun(std::string model_dir, const QuantizeModelOptions& options)
      : model_dir_(std::move(model_dir)), options_(options), start_(Clock::now()) {}

  absl::StatusOr<QuantizeModelReport> Run();

 private:
  absl::Status Prepare();
  absl::Status LoadInputs();
  absl::StatusOr<double> Evaluate(runtime::LayerStreamer& streamer, const runtime::LayerHooks& hooks, const char* phase,
                                  double base);
  absl::Status QuantizeLayers();
  absl::Status CalibrateLayer(int64_t index, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs);
  absl::Status FinishLayer(int64_t index, runtime::DecoderLayer& layer);
  absl::Status EvaluateAfter();
  void Progress(const std::string& phase, int layer, double fraction, double eta, const std::string& message) const;

  std::string model_dir_;
  const QuantizeModelOptions options_;  // a copy: the run owns what it reads
  Clock::time_point start_;
  checkpoint::ModelConfig model_;
  std::unique_ptr<LayerQuantizer> quantizer_;
  std::unique_ptr<exporter::HfQuarkExporter> exporter_;
  std::unique_ptr<runtime::Tokenizer> tokenizer_;
  std::vector<int64_t> eval_ids_;
  std::vector<at::Tensor> samples_;
  std::unique_ptr<runtime::LayerStreamer> streamer_;
  std::vector<std::shared_ptr<QuantLinear>> current_;  // the layer being quantized
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

absl::Status QuantizeRun::Prepare() {
  Progress("prepare", 0, 0, 0, "validating the config against the model");
  auto model = checkpoint::LoadModelConfig(model_dir_);
  if (!model.ok()) return model.status();
  model_ = *std::move(model);
  auto modules = ListModelModules(model_dir_);
  if (!modules.ok()) return modules.status();
  if (auto s = ValidationStatus(ValidateConfig(options_.config, &*modules)); !s.ok()) return s;
  LayerPlan plan = BuildLayerPlan(options_.config, *modules);
  for (const LayerAssignment& a : plan.layers) {
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) continue;
    if (a.module_type == "Linear" && InDecoderLayer(model_, a.module)) continue;
    // The runtime owns the embeddings and the LM head outside the streamed layers: refuse rather than ignore.
    return absl::UnimplementedError(StrCat(a.module, " (", a.module_type, ", from ", a.SourceLabel(),
                                           "): only the linears of decoder layers are quantized in a causal LM; "
                                           "add it to exclude"));
  }
  if (!options_.output_dir.empty()) {
    exporter::HfQuarkExportOptions export_options;
    export_options.max_shard_bytes = static_cast<uint64_t>(options_.max_shard_bytes);
    auto exporter = exporter::HfQuarkExporter::Create(model_dir_, options_.output_dir, options_.config, plan, export_options);
    if (!exporter.ok()) return exporter.status();
    exporter_ = *std::move(exporter);
  }
  quantizer_ = std::make_unique<LayerQuantizer>(options_.config, std::move(plan));
  return absl::OkStatus();
}

absl::Status QuantizeRun::LoadInputs() {
  const std::string& calib = options_.calibration_file;
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
  auto samples = quantize::LoadCalibrationSamples(calib, model_, tokenizer_.get(), options_.num_calibration_samples,
                                                  options_.seq_len, options_.seed);
  if (!samples.ok()) return samples.status();
  samples_ = *std::move(samples);
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
  const double done = static_cast<double>(index) / static_cast<double>(model_.num_hidden_layers);
  const double eta = index == 0 ? 0 : Seconds(quantize_start_) / static_cast<double>(index) *
                                          static_cast<double>(model_.num_hidden_layers - index);
  const double base = eval_ids_.empty() ? 0 : kEvalShare;
  Progress("quantize", static_cast<int>(index) + 1, base + done * (1 - 3 * base), eta,
           StrCat("calibrating and quantizing ", layer.prefix()));
  auto linears = quantizer_->Calibrate(layer, inputs, streamer_->model());
  if (!linears.ok()) return linears.status();
  current_ = *std::move(linears);
  for (auto& [name, p] : quantize::SnapshotParams(current_)) params_[name] = std::move(p);
  return absl::OkStatus();
}

absl::Status QuantizeRun::FinishLayer(int64_t /*index*/, runtime::DecoderLayer& layer) {
  if (exporter_) {
    for (const auto& q : current_) {
      exporter::LinearExportData data = ExportDataOf(*q);
      if (q->config().weight && !IsCastType(q->config().weight->dtype)) {
        auto codes = q->ExportWeight();
        if (!codes.ok()) return codes.status();
        data.weight_codes = *std::move(codes);
      }
      if (auto s = exporter_->WriteLinear(data); !s.ok()) return s;
      q->ReleaseFloatWeight();
    }
    if (auto s = exporter_->CopyUnchanged(layer.prefix()); !s.ok()) return s;
  }
  current_.clear();
  return absl::OkStatus();
}

absl::Status QuantizeRun::QuantizeLayers() {
  auto streamer = runtime::LayerStreamer::Open(model_dir_);
  if (!streamer.ok()) return streamer.status();
  streamer_ = *std::move(streamer);
  runtime::LayerHooks hooks;
  hooks.before = [this](int64_t i, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
    return CalibrateLayer(i, layer, inputs);
  };
  hooks.after = [this](int64_t i, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&,
                       const std::vector<at::Tensor>&) { return FinishLayer(i, layer); };
  quantize_start_ = Clock::now();
  auto outputs = streamer_->Run(samples_, hooks);
  if (!outputs.ok()) return outputs.status();
  samples_.clear();
  report_.metrics["seconds_quantize"] = Seconds(quantize_start_);
  if (exporter_) {
    Progress("finish", static_cast<int>(model_.num_hidden_layers), 0.7, 0, "writing config.json and checking the export");
    auto files = exporter_->Finish();
    if (!files.ok()) return files.status();
    report_.files = *std::move(files);
    report_.quantization_config = exporter_->quantization_config();
  } else {
    report_.quantization_config = ConfigToQuarkJson(options_.config);
  }
  return absl::OkStatus();
}

absl::Status QuantizeRun::EvaluateAfter() {
  const auto eval_start = Clock::now();
  runtime::LayerHooks fake;
  fake.before = [this](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&) {
    auto linears = quantizer_->Apply(layer, params_);
    return linears.ok() ? absl::OkStatus() : linears.status();
  };
  auto after = Evaluate(*streamer_, fake, "evaluate_quantized", 1 - 2 * kEvalShare);
  if (!after.ok()) return after.status();
  report_.metrics["ppl_after"] = *after;
  if (exporter_) {
    auto reloaded = quantize::OpenQuantizedExport(options_.output_dir);
    if (!reloaded.ok()) return reloaded.status();
    auto ppl = Evaluate(*reloaded->streamer, reloaded->hooks, "evaluate_reloaded", 1 - kEvalShare);
    if (!ppl.ok()) return ppl.status();
    report_.metrics["ppl_reloaded"] = *ppl;
  }
  report_.metrics["seconds_eval"] += Seconds(eval_start);
  return absl::OkStatus();
}

absl::StatusOr<QuantizeModelReport> QuantizeRun::Run() {
  if (auto s = Prepare(); !s.ok()) return s;
  if (auto s = LoadInputs(); !s.ok()) return s;
  report_.metrics["num_layers"] = static_cast<double>(model_.num_hidden_layers);
  if (!eval_ids_.empty()) {
    const auto eval_start = Clock::now();
    auto float_streamer = runtime::LayerStreamer::Open(model_dir_);
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
  report_.metrics["seconds_total"] = Seconds(start_);
  Progress("done", static_cast<int>(model_.num_hidden_layers), 1, 0, "done");
  return std::move(report_);
}

}  // namespace

absl::StatusOr<QuantizeModelReport> QuantizeModel(const std::string& model_dir, const QuantizeModelOptions& options) {
  try {
    QuantizeRun run(model_dir, options);
    return run.Run();
  } catch (const std::exception& error) {
    // LibTorch throws; the engine's edge turns it into a Status (a daemon never dies of a bad request).
    return absl::InternalError(StrCat("quantize ", model_dir, ": ", error.what()));
  }
}

}  // namespace quark
