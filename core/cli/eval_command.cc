// quark eval: perplexity of a model folder or a GGUF file on a text (the project's protocol, see
// core/runtime/perplexity.h), streamed layer by layer so that any model size evaluates in about one layer of memory.
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/cli/command_registry.h"
#include "core/export/gguf_source.h"
#include "core/quantize/reload.h"
#include "core/runtime/compute_device.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/tokenizer.h"

namespace quark::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string text;
  std::string token_ids;
  int64_t seq_len = 0;
  int64_t max_windows = 0;
  std::string dtype = "f32";
  std::string device = "cpu";
  bool json = false;
};

// The model to evaluate and where its tokenizer is: an HF folder holds its tokenizer.model; a GGUF file is read
// through its weight source (dequantized on load) and takes the tokenizer.model beside it, checked to hold exactly
// the GGUF's vocabulary.
struct EvalModel {
  std::unique_ptr<runtime::LayerStreamer> streamer;
  runtime::LayerHooks hooks;  // an HF-quark export's activation / KV-cache quantization
  std::string tokenizer;
  std::shared_ptr<exporter::GgufWeightSource> gguf;
};

// An HF folder whose config.json carries quantization_config.quant_method "quark" (our export, or Quark's).
bool IsQuarkExport(const std::string& dir) {
  std::ifstream in(std::filesystem::path(dir) / "config.json");
  if (!in) return false;
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return false;
  const auto q = config.find("quantization_config");
  return q != config.end() && q->is_object() && q->value("quant_method", "") == "quark";
}

absl::StatusOr<EvalModel> OpenModel(const std::string& model, const runtime::StreamerOptions& options) {
  EvalModel out;
  if (IsQuarkExport(model)) {
    // Packed weights dequantized on load, and the exported activation quantization applied as the export says.
    auto reloaded = quantize::OpenQuantizedExport(model, options);
    if (!reloaded.ok()) return reloaded.status();
    out.streamer = std::move(reloaded->streamer);
    out.hooks = std::move(reloaded->hooks);
    out.tokenizer = model;
    return out;
  }
  if (!exporter::IsGgufFile(model)) {
    auto streamer = runtime::LayerStreamer::Open(model, options);
    if (!streamer.ok()) return streamer.status();
    out.streamer = *std::move(streamer);
    out.tokenizer = model;
    return out;
  }
  auto source = exporter::GgufWeightSource::Open(model);
  if (!source.ok()) return source.status();
  out.gguf = *source;
  auto streamer = runtime::LayerStreamer::Create(out.gguf->config(), out.gguf, options);
  if (!streamer.ok()) return streamer.status();
  out.streamer = *std::move(streamer);
  return out;
}

absl::StatusOr<std::vector<int64_t>> InputIds(const EvalArgs& args, const EvalModel& model) {
  const checkpoint::ModelConfig& config = model.streamer->config();
  if (!args.token_ids.empty()) {
    auto sequences = runtime::ReadTokenIdFile(args.token_ids);
    if (!sequences.ok()) return sequences.status();
    std::vector<int64_t> ids;
    for (const auto& s : *sequences) ids.insert(ids.end(), s.begin(), s.end());
    return ids;  // pre-tokenized input is taken as is (BOS included by the producer)
  }
  std::string tokenizer_path = model.tokenizer;
  if (model.gguf) {
    auto path = exporter::GgufTokenizerModel(model.gguf->file());
    if (!path.ok()) return path.status();
    tokenizer_path = *path;
  }
  auto tokenizer = runtime::Tokenizer::Open(tokenizer_path, config.bos_token_id, config.eos_token_id);
  if (!tokenizer.ok()) return tokenizer.status();
  auto text = runtime::ReadTextFile(args.text);
  if (!text.ok()) return text.status();
  return (*tokenizer)->EncodeWithBos(*text);
}

int RunEval(const EvalArgs& args) {
  if (args.text.empty() == args.token_ids.empty()) {
    std::cerr << "quark eval: give exactly one of --text or --token-ids\n";
    return kExitBadInput;
  }
  // Evaluation is the layer streamer and the head alone, which place everything on their device (docs/gpu.md).
  absl::StatusOr<runtime::ComputeDevice> device = runtime::ComputeDevice::Open(args.device, "--device");
  if (!device.ok()) {
    std::cerr << "quark eval: " << device.status().message() << "\n";
    return kExitBadInput;
  }
  runtime::StreamerOptions options;
  options.device = *device;
  if (args.dtype == "bf16") {
    options.compute_dtype = at::kBFloat16;
  } else if (args.dtype != "f32") {
    std::cerr << "quark eval: --dtype \"" << args.dtype << "\" is not one of f32, bf16\n";
    return kExitBadInput;
  }
  auto model = OpenModel(args.model, options);
  if (!model.ok()) {
    std::cerr << "quark eval: " << model.status().message() << "\n";
    return kExitBadInput;
  }
  auto ids = InputIds(args, *model);
  if (!ids.ok()) {
    std::cerr << "quark eval: " << ids.status().message() << "\n";
    return kExitBadInput;
  }
  runtime::PerplexityOptions ppl_options;
  ppl_options.seq_len = args.seq_len;
  ppl_options.max_windows = args.max_windows;
  ppl_options.hooks = model->hooks;
  auto result = runtime::EvaluatePerplexity(*model->streamer, *ids, ppl_options);
  if (!result.ok()) {
    std::cerr << "quark eval: " << result.status().message() << "\n";
    return result.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure;
  }
  if (args.json) {
    nlohmann::json out = {{"tokens", result->tokens}, {"windows", result->windows}, {"seq_len", result->seq_len},
                          {"mean_nll", result->mean_nll}, {"ppl", result->ppl}};
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "tokens:     " << result->tokens << "\nwindows:    " << result->windows << "\nseq_len:    "
              << result->seq_len << "\nmean_nll:   " << std::setprecision(6) << std::fixed << result->mean_nll
              << "\nperplexity: " << result->ppl << "\n";
  }
  return kExitOk;
}

void Setup(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* eval = app.add_subcommand("eval", "Perplexity of a model on a text (non-overlapping windows, streamed by layer)");
  eval->add_option("--model", args->model, "HF model folder (float, or an HF-quark export: packed weights and its activation quantization) or a GGUF file (with --text: the "
                  "tokenizer.model beside it)")->required();
  eval->add_option("--text", args->text, "text file, encoded whole as [BOS] + tokens");
  eval->add_option("--token-ids", args->token_ids, "pre-tokenized ids (whitespace/comma separated) instead of --text");
  eval->add_option("--seq-len", args->seq_len, "window length L (default min(2048, max_position_embeddings))")
      ->check(CLI::NonNegativeNumber);
  eval->add_option("--max-windows", args->max_windows, "evaluate only the first N windows (0 = all)")
      ->check(CLI::NonNegativeNumber);
  eval->add_option("--dtype", args->dtype, "compute dtype: f32 (default) or bf16");
  eval->add_option("--device", args->device,
                   "where the layers, activations and head live: cpu (default), cuda, cuda:N");
  eval->add_flag("--json", args->json, "print one JSON object {tokens, windows, seq_len, mean_nll, ppl}");
  eval->callback([args] { SetExitCode(RunEval(*args)); });
}

const CommandRegistration kRegistration(Setup);

}  // namespace
}  // namespace quark::cli
