// quark quantize --model DIR (--scheme NAME | --config FILE) [--kv-cache-dtype fp8] [--exclude PATTERN]...
//   [--quant-algo rotation,smoothquant,awq,gptq] [--calib FILE] [--num-calib-samples N] [--seq-len L] [--eval TEXT]
//   [--output DIR] [--export hf_quark|gguf|onnx|compressed_tensors]... [--gguf-type Q4_1]
// quark quantize --model DIR --auto --candidates uint4_wo_128,int8 (--target-bits 4.5 | --max-kld X | --max-ppl-increase X)
//   --calib FILE [--sensitivity-cache DIR] [--auto-report FILE] [--output DIR] ...   (#36: a searched mixed recipe)
// quark quantize --model DIR --export gguf --gguf-type Q4_K_M [--gguf-pure] [--imatrix F | --imatrix-from-calibration]
//   [--quant-algo rotation,gptq] --output DIR   (no scheme: llama-quantize's mixture, after an optional rotation;
//   gptq rounds the mixture's Q4_K/Q5_K/Q6_K tensors itself, K-quant-aware)
// Quantizes a float HF model into its exports (HF-quark for vLLM by default; GGUF for llama.cpp; ONNX for ONNX
// Runtime; several in one pass), with a progress bar on a terminal (plain lines otherwise) and the perplexity before
// and after when --eval is given. Without --output it only evaluates (any scheme the numerics run, also one an export
// cannot pack).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <variant>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "absl/strings/numbers.h"

#include "core/cli/auto_search_options.h"
#include "core/cli/command_registry.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/cli/config_options.h"
#include "core/config/config_choice.h"
#include "core/config/llama_cpp_rules.h"  // #37 item 4
#include "core/estimate/expert_group_choice.h"
#include "core/quantize/layer_checkpoint.h"
#include "core/quantize/quantize_model.h"
#include "core/quantize/run_memory.h"

namespace quark::cli {
namespace {

struct QuantizeCommandOptions {
  ConfigOptions config;
  std::string model;
  std::string output;
  std::string calib;
  std::string eval;
  int num_calib_samples = 128;
  int seq_len = 512;
  int64_t moe_min_expert_tokens = 32;
  std::string expert_group_size = "0";  // a count, or "auto"
  double memory_budget_gb = 0;          // with --expert-group-size auto; 0 = MemAvailable
  int eval_seq_len = 0;
  int eval_max_windows = 0;
  uint64_t seed = 42;
  double max_shard_gb = 5.0;
  std::vector<std::string> exports;
  std::string gguf_type;
  bool gguf_pure = false;
  std::string gguf_imatrix;
  bool gguf_imatrix_from_calibration = false;
  std::optional<double> max_ppl_increase;
  std::string checkpoint_dir;
  std::string device = "cpu";
  std::string compute_dtype = "f32";
  double device_memory_gb = 0;
  double search_batch_gb = -1;
  AutoSearchOptions auto_search;
};

std::string Duration(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02d}s", s / 60, s % 60) : fmt::format("{}s", s);
}

// A one-line bar redrawn in place on a terminal; one line per report otherwise (logs, CI).
void ShowProgress(const QuantizeProgress& p, bool terminal) {
  const std::string layer = p.num_layers > 0 && p.phase == "quantize" ? fmt::format(" layer {}/{}", p.layer, p.num_layers) : "";
  const std::string eta = p.eta_seconds > 0 ? " ETA " + Duration(p.eta_seconds) : "";
  if (!terminal) {
    std::cerr << fmt::format("[{:3.0f}%] {}{}{}: {}\n", p.fraction * 100, p.phase, layer, eta, p.message);
    return;
  }
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(p.fraction * kWidth);
  std::cerr << fmt::format("\r[{}{}] {:3.0f}% {}{}{}\x1b[K", std::string(filled, '#'), std::string(kWidth - filled, '.'),
                           p.fraction * 100, p.phase, layer, eta)
            << (p.phase == "done" ? "\n" : "") << std::flush;
}

// The Config of a GGUF quantized by llama.cpp's rules: no scheme, and only algorithms that transform the float
// weights first (core/config/llama_cpp_rules.h).
absl::StatusOr<Config> LlamaCppRulesConfig(const ConfigOptions& options) {
  Config config;
  QUARK_ASSIGN_OR_RETURN(config.algo_config, AlgorithmsFromFlags(options.quant_algo, options.quant_algo_config_file));
  QUARK_RETURN_IF_ERROR(CheckAlgorithmsBeforeLlamaCppRules(
      config.algo_config, [](size_t) { return std::string("--quant-algo"); }, "--scheme or --config",
      /*allow_kquant_rounding=*/true));
  return config;
}

// --auto: the searched recipe (nullopt when only the search was asked for), or the exit code of a failure.
absl::StatusOr<std::optional<Config>> SearchedConfig(const QuantizeCommandOptions& o) {
  AutoSearchContext context{o.model, o.calib, o.num_calib_samples, o.seq_len, o.seed, o.max_ppl_increase,
                            !o.config.scheme.empty() || !o.config.config_file.empty()};
  auto config = RunAutoSearch(o.auto_search, context);
  if (!config.ok()) return config.status();
  if (o.output.empty() && o.eval.empty()) return std::optional<Config>();
  return std::optional<Config>(*std::move(config));
}

// --expert-group-size: a count, or "auto": the largest group whose estimated peak (estimate/expert_group_choice.h)
// fits --memory-budget-gb (else MemAvailable), told on stderr.
absl::StatusOr<int64_t> ExpertGroupSize(const QuantizeCommandOptions& o, const QuantizeModelOptions& options) {
  if (o.expert_group_size != "auto") {
    int64_t group = -1;
    if (!absl::SimpleAtoi(o.expert_group_size, &group) || group < 0) {
      return absl::InvalidArgumentError(StrCat("--expert-group-size: \"", o.expert_group_size,
                                               "\" is neither a count >= 0 nor auto"));
    }
    return group;
  }
  uint64_t budget = static_cast<uint64_t>(o.memory_budget_gb * 1e9);
  if (o.memory_budget_gb <= 0) {
    auto available = estimate::MemAvailableBytes();
    if (!available.ok()) {
      return absl::UnavailableError(
          StrCat("--memory-budget-gb: ", std::string(available.status().message()), ": give the budget"));
    }
    budget = *available;
  }
  QUARK_ASSIGN_OR_RETURN(estimate::ExpertGroupChoice choice,
                         estimate::ChooseExpertGroupSizeForRun(o.model, RunMemoryInputsOf(options), budget));
  std::cerr << fmt::format(
      "expert_group_size auto: {} (estimated peak {:.2f} GB of the {:.2f} GB budget{}; the whole layer {:.2f} GB, {} "
      "routed experts a layer)\n",
      choice.group_size == 0 ? std::string("0, the whole layer fits") : std::to_string(choice.group_size),
      choice.peak_host_bytes / 1e9, budget / 1e9, o.memory_budget_gb > 0 ? "" : " (MemAvailable)",
      choice.whole_layer_bytes / 1e9, choice.experts);
  return choice.group_size;
}

int RunQuantize(const QuantizeCommandOptions& o) {
  std::optional<Config> searched;
  if (o.auto_search.enabled) {
    auto config = SearchedConfig(o);
    if (!config.ok()) {
      std::cerr << "quark quantize: " << config.status().message() << "\n";
      const auto code = config.status().code();
      return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ? kExitBadInput
                                                                                               : kExitFailure;
    }
    if (!config->has_value()) return kExitOk;
    searched = **std::move(config);
  }
  if (o.output.empty() && o.eval.empty()) {
    std::cerr << "quark quantize: --output or --eval: give at least one (an export, or a perplexity to measure)\n";
    return kExitBadInput;
  }
  // `--export gguf --gguf-type T` alone quantizes the float weights by llama.cpp's rules: no scheme needed. A rotation,
  // SmoothQuant or AWQ may come first (they transform the float weights; the others need the engine's own scheme).
  const bool llama_cpp_rules_only =
      QuantizesByLlamaCppRules(!o.config.scheme.empty() || !o.config.config_file.empty(), o.gguf_type, o.exports);
  auto config = searched                 ? absl::StatusOr<Config>(*searched)
                : llama_cpp_rules_only ? LlamaCppRulesConfig(o.config)
                                       : o.config.Resolve();
  if (!config.ok()) {
    std::cerr << "quark quantize: " << config.status().message() << "\n";
    return kExitBadInput;
  }
  QuantizeModelOptions options;
  options.config = *std::move(config);
  options.output_dir = o.output;
  options.export_formats = o.exports;
  options.gguf_type = o.gguf_type;
  options.gguf_pure = o.gguf_pure;
  options.gguf_imatrix = o.gguf_imatrix;
  options.gguf_imatrix_from_calibration = o.gguf_imatrix_from_calibration;
  // With --auto the bound was the search's budget; it gates the export too when there is an evaluation text.
  if (!searched || !o.eval.empty()) options.max_ppl_increase = o.max_ppl_increase;
  options.calibration_file = o.calib;
  options.num_calibration_samples = o.num_calib_samples;
  options.seq_len = o.seq_len;
  options.moe_min_expert_tokens = o.moe_min_expert_tokens;
  options.seed = o.seed;
  options.eval_text_file = o.eval;
  options.eval_seq_len = o.eval_seq_len;
  options.eval_max_windows = o.eval_max_windows;
  options.max_shard_bytes = static_cast<int64_t>(o.max_shard_gb * (1LL << 30));
  options.checkpoint_dir = o.checkpoint_dir;
  options.device = o.device;
  options.compute_dtype = o.compute_dtype;
  options.device_memory_budget = static_cast<int64_t>(o.device_memory_gb * (1LL << 30));
  options.search_batch_bytes = o.search_batch_gb < 0 ? -1 : static_cast<int64_t>(o.search_batch_gb * (1LL << 30));
  auto group = ExpertGroupSize(o, options);
  if (!group.ok()) {
    std::cerr << "quark quantize: " << group.status().message() << "\n";
    return group.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure;
  }
  options.expert_group_size = *group;
  const bool terminal = isatty(fileno(stderr)) != 0;
  options.on_progress = [terminal](const QuantizeProgress& p) { ShowProgress(p, terminal); };
  auto report = QuantizeModel(o.model, options);
  if (!report.ok()) {
    if (terminal) std::cerr << "\n";
    std::cerr << "quark quantize: " << report.status().message() << "\n";
    const auto code = report.status().code();
    return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
                   code == absl::StatusCode::kAlreadyExists || code == absl::StatusCode::kUnimplemented ||
                   code == absl::StatusCode::kFailedPrecondition
               ? kExitBadInput
               : kExitFailure;
  }
  const auto& m = report->metrics;
  auto metric = [&m](const char* key) { return m.count(key) ? fmt::format("{:.4f}", m.at(key)) : std::string("-"); };
  if (m.count("ppl_before")) {
    std::cout << fmt::format("perplexity: float {}  quantized {}  reloaded {}{}{}\n", metric("ppl_before"),
                             metric("ppl_after"), metric("ppl_reloaded"),
                             m.count("ppl_gguf") ? "  gguf " + metric("ppl_gguf") : std::string(),
                             m.count("ppl_compressed_tensors")  // #30 item 2
                                 ? "  compressed_tensors " + metric("ppl_compressed_tensors")
                                 : std::string());
  }
  if (m.count("export_weight_differences") && m.at("export_weight_differences") > 0) {
    // Real quantization rounds x / s + z, fake quantization round(x / s) + z (numerics.md): ties land apart.
    std::cout << fmt::format("export: weight elements rounded otherwise than in the quantized (fake) model: {} (ties "
                             "of the export's rounding after the zero point)\n",
                             static_cast<int64_t>(m.at("export_weight_differences")));
  }
  // The artifact is complete: the checkpoint has served its purpose.
  quantize::RemoveLayerCheckpoint(o.checkpoint_dir);
  // MoE calibration coverage: the per-expert token counts of each layer (routed, then topped up).
  for (const std::string& line : report->algorithm_log) {
    if (line.rfind("moe ", 0) == 0) std::cout << line << "\n";
  }
  if (m.count("resumed_at_layer")) std::cout << "resumed at layer " << static_cast<int>(m.at("resumed_at_layer")) << "\n";
  if (!o.output.empty()) std::cout << "wrote " << o.output << " (" << report->files.size() << " files)\n";
  std::cout << fmt::format("time: quantize {}s, total {}s\n", metric("seconds_quantize"), metric("seconds_total"));
  return kExitOk;
}

const CommandRegistration kQuantize([](CLI::App& app) {
  auto o = std::make_shared<QuantizeCommandOptions>();
  auto* command = app.add_subcommand("quantize", "quantize an HF model folder into an HF-quark export (vLLM)");
  command->add_option("--model", o->model, "the float HF model folder")->required();
  o->config.AddTo(*command);
  o->auto_search.AddTo(*command);
  command->add_option("--calib", o->calib, "calibration text / JSONL (\"text\") / token-id file; default: synthetic ids");
  command->add_option("--num-calib-samples", o->num_calib_samples, "calibration samples")->check(CLI::PositiveNumber);
  command->add_option("--seq-len", o->seq_len, "calibration sample length in tokens")->check(CLI::PositiveNumber);
  command->add_option("--moe-min-expert-tokens", o->moe_min_expert_tokens,
                      "MoE: an expert the router sends fewer calibration tokens also calibrates on the tokens that "
                      "ranked it highest, up to this many (default 32; 0 = no top-up)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--expert-group-size", o->expert_group_size,
                      "MoE: keep at most this many routed experts of a layer in memory, reading each from the "
                      "checkpoint when a pass needs it (same outputs and exports; RTN schemes or GPTQ alone; 0 = the whole "
                      "layer, the default; auto = the largest group whose estimated peak fits --memory-budget-gb)");
  command->add_option("--memory-budget-gb", o->memory_budget_gb,
                      "with --expert-group-size auto: the host memory to fit, GB (default: MemAvailable)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--seed", o->seed, "seed of the calibration sampling");
  command->add_option("--eval", o->eval, "a text file: print the perplexity before and after");
  command->add_option("--eval-seq-len", o->eval_seq_len, "perplexity window (0 = protocol default)");
  command->add_option("--eval-max-windows", o->eval_max_windows, "evaluate only the first N windows (0 = all)");
  command->add_option("--max-shard-gb", o->max_shard_gb, "shard size limit of the safetensors, GiB");
  command->add_option("--checkpoint-dir", o->checkpoint_dir,
                      "resume: per-layer checkpoints go here; a rerun of the same command after a crash goes on from "
                      "the last finished layer (removed on success)");
  command->add_option("--device", o->device, "where the passes run: cpu (default), cuda, cuda:N");
  command->add_option("--compute-dtype", o->compute_dtype,
                      "f32 (default) or bf16: the dtype layers and activations compute in (bf16: a GPU's fast path)");
  command->add_option("--device-memory-gb", o->device_memory_gb,
                      "GiB of device memory the layers and activations may hold (0 = 90% of the device's free memory "
                      "on a GPU; no budget on the CPU); past it the run stops naming the layer")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--search-batch-gb", o->search_batch_gb,
                      "GiB of device memory AWQ's searches may use to try several ratios / clip factors at once "
                      "(default: 2 on a GPU, 0.25 on the CPU; 0 = one at a time), counted in the device budget")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--output", o->output, "the export folder (must not exist or be empty); none: evaluate only");
  command->add_option("--export", o->exports,
                      "hf_quark (default), gguf, onnx, compressed_tensors; repeat for several in one pass");
  command->add_option("--max-ppl-increase", o->max_ppl_increase,
                      "accuracy gate with --eval: fail (and remove --output) when perplexity rises more than this, "
                      "e.g. 0.02 = +2%");
  command->add_option("--gguf-type", o->gguf_type,
                      "llama-quantize's file type for the weights left in float, with its per-tensor mixture: F32 F16 "
                      "BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K "
                      "IQ4_NL IQ4_XS");
  command->add_flag("--gguf-pure", o->gguf_pure,
                    "with --gguf-type: every such weight in the type's own block type (llama-quantize --pure)");
  command->add_option("--imatrix", o->gguf_imatrix,
                      "with --gguf-type: llama.cpp importance matrix (imatrix.gguf or legacy .dat) for the K-quant "
                      "and IQ4 weights, as llama-quantize --imatrix");
  command->add_flag("--imatrix-from-calibration", o->gguf_imatrix_from_calibration,
                    "with --export gguf: the importance matrix of this run's calibration (--calib, else --eval) as "
                    "llama-imatrix gathers it, for the K-quant and IQ4 weights; written as imatrix.gguf beside "
                    "model.gguf");
  command->callback([o] { SetExitCode(RunQuantize(*o)); });
});

}  // namespace
}  // namespace quark::cli
