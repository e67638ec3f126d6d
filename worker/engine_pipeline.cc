#include "worker/engine_pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <exception>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

#include "core/config/config_choice.h"
#include "core/config/export_format_proto.h"
#include "core/config/llama_cpp_rules.h"  // #37 item 4
#include "core/config/proto_convert.h"
#include "core/estimate/expert_group_choice.h"
#include "core/quantize/quantize_model.h"
#include "core/quantize/run_memory.h"
#include "worker/float_baseline.h"
#include "worker/job_evaluation.h"
#include "worker/sensitivity_pass.h"
#include "worker/storage/strings.h"

namespace quark::worker {
namespace {

// spec.config or spec.preset, then kv_cache_dtype and exclude, exactly as `quark quantize` resolves its flags.
absl::StatusOr<quark::Config> ResolveSpecConfig(const quark::v1::JobSpec& spec) {
  ConfigChoice choice;
  if (spec.has_config()) {
    absl::StatusOr<quark::Config> config = FromProto(spec.config());
    if (!config.ok()) return absl::InvalidArgumentError(str::Cat("spec.config.", config.status().message()));
    choice.config = *std::move(config);
  } else {
    choice.preset = spec.preset();
  }
  choice.kv_cache_dtype = spec.kv_cache_dtype();
  choice.exclude.assign(spec.exclude().begin(), spec.exclude().end());
  for (int i = 0; i < spec.algo_config_size(); ++i) {
    absl::StatusOr<quark::AlgoConfig> algo = FromProto(spec.algo_config(i), str::Cat("spec.algo_config[", i, "]"));
    if (!algo.ok()) return algo.status();
    choice.algorithms.push_back(*std::move(algo));
  }
  absl::StatusOr<quark::Config> resolved = ResolveConfigChoice(choice);
  if (!resolved.ok()) return absl::Status(resolved.status().code(), str::Cat("spec: ", resolved.status().message()));
  return resolved;
}

// A GGUF by llama.cpp's rules: no scheme, only the spec's algorithms that transform the float weights
// (core/config/llama_cpp_rules.h; quarkd refused the others at submit).
absl::StatusOr<quark::Config> LlamaCppRulesConfig(const quark::v1::JobSpec& spec) {
  quark::Config config;
  for (int i = 0; i < spec.algo_config_size(); ++i) {
    absl::StatusOr<quark::AlgoConfig> algo = FromProto(spec.algo_config(i), str::Cat("spec.algo_config[", i, "]"));
    if (!algo.ok()) return algo.status();
    config.algo_config.push_back(*std::move(algo));
  }
  if (absl::Status s = CheckAlgorithmsBeforeLlamaCppRules(
          config.algo_config, [](size_t i) { return str::Cat("spec.algo_config[", i, "]"); },
          "spec.preset or spec.config", /*allow_kquant_rounding=*/false);
      !s.ok()) {
    return s;
  }
  return config;
}

// The JobSpec's export formats in the engine's names (empty = HF-quark alone).
absl::StatusOr<std::vector<std::string>> ExportFormats(const quark::v1::JobSpec& spec) {
  std::vector<std::string> formats;
  for (int i = 0; i < spec.export_formats_size(); ++i) {
    absl::StatusOr<std::string> name = quark::ExportFormatName(spec.export_formats(i), i);
    if (!name.ok()) return name.status();
    formats.push_back(*std::move(name));
  }
  return formats;
}

// QuantizeModel's phases in the job API's vocabulary (service.proto, Progress.phase); the engine's own name
// stays at the front of the message.
std::string JobPhase(const std::string& engine_phase) {
  if (engine_phase == "prepare") return "load";
  if (engine_phase == "finish" || engine_phase == "done") return "export";
  if (engine_phase.rfind("evaluate", 0) == 0) return "evaluate";
  return engine_phase;  // "quantize": each layer is calibrated, quantized and written in turn
}

QuantizeModelOptions Options(const PipelineRequest& request, quark::Config config) {
  const quark::v1::JobSpec& spec = request.spec;
  QuantizeModelOptions options;
  options.config = std::move(config);
  options.output_dir = request.output_dir.string();
  options.device = request.device;
  if (!spec.resources().compute_dtype().empty()) options.compute_dtype = spec.resources().compute_dtype();
  options.calibration_file = request.calibration_file.string();
  // proto3 zeros mean "unset": keep the engine's defaults (128 samples, 512 tokens, seed 42).
  if (spec.calibration().num_samples() > 0) options.num_calibration_samples = spec.calibration().num_samples();
  if (spec.calibration().seq_len() > 0) options.seq_len = spec.calibration().seq_len();
  if (spec.calibration().seed() != 0) options.seed = spec.calibration().seed();
  options.eval_text_file = request.evaluation_file.string();
  options.eval_seq_len = spec.evaluation().seq_len();
  options.eval_max_windows = spec.evaluation().max_windows();
  if (spec.evaluation().has_max_ppl_increase()) options.max_ppl_increase = spec.evaluation().max_ppl_increase();
  return options;
}

// #36 item 1: a sweep's child shares its float figures with its siblings when it has evaluation text; a key that
// cannot be computed leaves it measuring them itself, as any job does.
std::unique_ptr<SharedFloatBaseline> OpenFloatBaseline(const PipelineRequest& request, ProgressSink& progress,
                                                       const CancelToken& cancel) {
  if (!request.float_baseline_store || request.evaluation_file.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<SharedFloatBaseline>> baseline = SharedFloatBaseline::Open(
      request.float_baseline_store, request, progress, [&cancel] { return cancel.IsCancelled(); });
  if (baseline.ok()) return *std::move(baseline);
  progress.Log(str::Cat("float baseline: not shared (", baseline.status().message(), "); measuring it here"));
  return nullptr;
}

// The producer measures every float figure not stored yet before it quantizes, so that its siblings, quantizing
// meanwhile, find them stored when they need them: the perplexity first (they wait for it at their start), then the
// tasks and the KLD reference rows.
absl::Status MeasureFloatBaseline(const PipelineRequest& request, const QuantizeModelOptions& options,
                                  SharedFloatBaseline& baseline, ProgressSink& progress, const CancelToken& cancel) {
  if (!baseline.producer()) return absl::OkStatus();
  quark::v1::Progress start;
  start.set_phase("evaluate");
  start.set_message("float baseline: measuring the float model for the sweep");
  progress.Report(start);
  try {
    if (!baseline.Ppl()) {  // an earlier sweep of the same model and text may have stored it
      absl::StatusOr<double> ppl = MeasureFloatPerplexity(request.model_dir.string(), options);
      if (!ppl.ok()) return ppl.status();
      baseline.StorePpl(*ppl);
    }
    if (cancel.IsCancelled()) return absl::CancelledError("cancelled");
    if (absl::Status s = EvaluateJobFloat(request, options.export_formats, progress, cancel, baseline.Figures());
        !s.ok()) {
      return s;
    }
  } catch (const std::exception& e) {
    return absl::InternalError(str::Cat("float baseline: ", e.what()));
  }
  baseline.Finish();
  return absl::OkStatus();
}

// The share of the pipeline's progress the quantization takes when tasks or KLD follow it.
constexpr double kQuantizeShareWithEvaluation = 0.6;

// #32 item 5: an MoE job whose whole layer would not fit the host memory this worker has free streams its routed
// experts in groups (runtime/expert_streaming.h: the exports and figures are byte for byte the whole layer's; only
// memory and time change). The budget is MemAvailable, or QUARK_WORKER_MEMORY_BUDGET_GB where the operator sets one.
// Dense models, jobs running an algorithm that holds state over the whole layer (AWQ, SmoothQuant, GPTAQ...: refused
// with groups; GPTQ alone streams) and models whose shape the estimator cannot read keep the whole layer, as before.
int64_t ExpertGroupSizeFor(const PipelineRequest& request, const QuantizeModelOptions& options, ProgressSink& progress) {
  uint64_t budget = 0;
  if (const char* gb = std::getenv("QUARK_WORKER_MEMORY_BUDGET_GB"); gb != nullptr && *gb != '\0') {
    double value = 0;
    if (!absl::SimpleAtod(gb, &value) || value <= 0) {
      progress.Log(str::Cat("QUARK_WORKER_MEMORY_BUDGET_GB=\"", gb, "\" is not a positive number: ignored"));
    } else {
      budget = static_cast<uint64_t>(value * 1e9);
    }
  }
  if (budget == 0) {
    absl::StatusOr<uint64_t> available = estimate::MemAvailableBytes();
    if (!available.ok()) return 0;
    budget = *available;
  }
  absl::StatusOr<estimate::ExpertGroupChoice> choice =
      estimate::ChooseExpertGroupSizeForRun(request.model_dir.string(), RunMemoryInputsOf(options), budget);
  if (choice.ok()) {
    if (choice->group_size > 0) {
      progress.Log(str::Cat("expert_group_size ", choice->group_size, ": the whole layer needs an estimated ",
                            absl::StrFormat("%.2f", choice->whole_layer_bytes / 1e9), " GB of the ",
                            absl::StrFormat("%.2f", budget / 1e9), " GB this worker has; ", choice->group_size,
                            " of the ", choice->experts, " routed experts at a time need ",
                            absl::StrFormat("%.2f", choice->peak_host_bytes / 1e9), " GB"));
    }
    return choice->group_size;
  }
  if (absl::IsResourceExhausted(choice.status())) {  // it may not fit; one expert at a time is its best chance
    progress.Log(str::Cat(choice.status().message(), "; streaming one expert at a time"));
    return 1;
  }
  return 0;
}

class EnginePipeline : public QuantizePipeline {
 public:
  absl::StatusOr<PipelineResult> Run(const PipelineRequest& request, ProgressSink& progress,
                                     const CancelToken& cancel) override {
    // #36 item 3: an automatic search's sensitivity child measures and exports nothing else.
    if (request.spec.sensitivity_pass()) return RunSensitivityPass(request, progress, cancel);
    absl::StatusOr<std::vector<std::string>> formats = ExportFormats(request.spec);
    if (!formats.ok()) return formats.status();
    // A GGUF by llama.cpp's own rules needs no scheme: the spec may name no preset and no config.
    const bool llama_cpp_rules_only = QuantizesByLlamaCppRules(
        request.spec.has_config() || !request.spec.preset().empty(), request.spec.gguf_type(), *formats);
    absl::StatusOr<quark::Config> config =
        llama_cpp_rules_only ? LlamaCppRulesConfig(request.spec) : ResolveSpecConfig(request.spec);
    if (!config.ok()) return config.status();
    QuantizeModelOptions options = Options(request, *std::move(config));
    options.export_formats = *std::move(formats);
    options.gguf_type = request.spec.gguf_type();
    options.gguf_pure = request.spec.gguf_pure();
    options.gguf_imatrix = request.gguf_imatrix_file.string();
    options.gguf_imatrix_from_calibration = request.spec.gguf_imatrix_from_calibration();
    if (!options.gguf_type.empty() &&
        std::find(options.export_formats.begin(), options.export_formats.end(), "gguf") == options.export_formats.end()) {
      return absl::InvalidArgumentError("spec.gguf_type: set, but EXPORT_FORMAT_GGUF is not among spec.export_formats");
    }
    if (absl::Status s = CheckJobEvaluation(request, options.export_formats); !s.ok()) return s;
    options.expert_group_size = ExpertGroupSizeFor(request, options, progress);
    // With tasks or KLD after the export, QuantizeModel's run fills the first part of the pipeline's progress.
    const bool evaluates = !request.spec.evaluation().tasks().empty() || request.spec.evaluation().kld();
    const double quantize_share = evaluates ? kQuantizeShareWithEvaluation : 1.0;
    options.on_progress = [&progress, quantize_share](const QuantizeProgress& p) {
      quark::v1::Progress out;
      out.set_phase(JobPhase(p.phase));
      out.set_layer(p.layer);
      out.set_num_layers(p.num_layers);
      out.set_fraction(p.fraction * quantize_share);
      out.set_eta_seconds(p.eta_seconds);
      out.set_message(p.message.empty() ? p.phase : str::Cat(p.phase, ": ", p.message));
      progress.Report(out);
    };
    options.cancelled = [&cancel] { return cancel.IsCancelled(); };
    options.checkpoint_dir = request.checkpoint_dir.string();
    if (options.expert_group_size > 0 && !options.config.algo_config.empty() && !options.checkpoint_dir.empty()) {
      // GPTQ's weights of experts streamed in groups stay in the run's scratch folder, which a layer checkpoint does
      // not hold (QuantizeRun refuses the pair): a job that only fits with its experts streamed runs uncheckpointed.
      progress.Log("layer checkpoint off for this run: GPTQ's weights of experts streamed in groups are not "
                   "checkpointed, so a retry starts again at layer 0");
      options.checkpoint_dir.clear();
    }
    options.checkpoint_identity = request.checkpoint_identity;
    options.on_layer_checkpointed = request.on_layer_checkpointed;
    options.on_notice = [&progress](const std::string& line) { progress.Log(line); };
    options.on_metrics = [&progress](const std::map<std::string, double>& metrics) { progress.Metrics(metrics); };
    std::unique_ptr<SharedFloatBaseline> baseline = OpenFloatBaseline(request, progress, cancel);
    eval::FloatFigures float_figures;
    if (baseline) {
      if (absl::Status s = MeasureFloatBaseline(request, options, *baseline, progress, cancel); !s.ok()) return s;
      options.known_float_ppl = [b = baseline.get()] { return b->Ppl(); };
      options.on_float_ppl = [b = baseline.get()](double ppl) { b->StorePpl(ppl); };
      float_figures = baseline->Figures();
    }
    absl::StatusOr<QuantizeModelReport> report;
    try {
      report = QuantizeModel(request.model_dir.string(), options);
    } catch (const std::exception& e) {
      // The engine reports errors as values; this catches what a LibTorch op may still throw.
      return absl::InternalError(str::Cat("engine: ", e.what()));
    }
    if (!report.ok()) return report.status();
    PipelineResult result;
    result.metrics = report->metrics;
    result.resolved_config = nlohmann::json::parse(report->quantization_config.dump());
    if (evaluates) {
      absl::Status evaluated;
      try {
        evaluated =
            EvaluateJob(request, options.export_formats, progress, cancel, quantize_share, result, float_figures);
      } catch (const std::exception& e) {
        evaluated = absl::InternalError(str::Cat("evaluate: ", e.what()));
      }
      if (!evaluated.ok()) return evaluated;
    }
    if (baseline) {
      // How many float passes this child ran for the sweep and how many figures it read instead (#36 item 1).
      result.metrics["float_passes"] = baseline->passes();
      result.metrics["float_figures_read"] = baseline->read();
    }
    return result;
  }
};

}  // namespace

std::shared_ptr<QuantizePipeline> MakeEnginePipeline() { return std::make_shared<EnginePipeline>(); }

}  // namespace quark::worker
