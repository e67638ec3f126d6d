#include "core/cli/eval_model.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/cli/command_registry.h"
#include "core/quantize/reload.h"
#include "core/runtime/compute_device.h"

namespace quark::cli {
namespace {

// An HF folder whose config.json carries quantization_config.quant_method "quark" (our export, or Quark's).
bool IsQuarkExport(const std::string& dir) {
  std::ifstream in(std::filesystem::path(dir) / "config.json");
  if (!in) return false;
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return false;
  const auto q = config.find("quantization_config");
  return q != config.end() && q->is_object() && q->value("quant_method", "") == "quark";
}

}  // namespace

absl::StatusOr<runtime::StreamerOptions> EvalStreamerOptions(const EvalArgs& args) {
  runtime::StreamerOptions options;
  absl::StatusOr<runtime::ComputeDevice> device = runtime::ComputeDevice::Open(args.device, "--device");
  if (!device.ok()) return absl::InvalidArgumentError(device.status().message());
  // Perplexity is the layer streamer and the head alone, which place everything on their device (docs/gpu.md); the
  // KLD and task scorers read logits in host memory.
  if (!device->is_cpu() && (args.kld || !args.tasks.empty())) {
    return absl::InvalidArgumentError("--device: --kld and --tasks run on the CPU in this build (perplexity runs on " +
                                      device->name() + ")");
  }
  options.device = *device;
  if (args.dtype == "bf16") {
    options.compute_dtype = at::kBFloat16;
  } else if (args.dtype != "f32") {
    return absl::InvalidArgumentError("--dtype \"" + args.dtype + "\" is not one of f32, bf16");
  }
  return options;
}

int EvalFailure(const absl::Status& status) {
  std::cerr << "quark eval: " << status.message() << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument || status.code() == absl::StatusCode::kNotFound
             ? kExitBadInput
             : kExitFailure;
}

absl::StatusOr<EvalModel> OpenEvalModel(const std::string& model, const runtime::StreamerOptions& options) {
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

absl::StatusOr<std::unique_ptr<runtime::Tokenizer>> OpenEvalTokenizer(const EvalModel& model) {
  const checkpoint::ModelConfig& config = model.streamer->config();
  std::string tokenizer_path = model.tokenizer;
  if (model.gguf) {
    auto path = exporter::GgufTokenizerModel(model.gguf->file());
    if (!path.ok()) return path.status();
    tokenizer_path = *path;
  }
  return runtime::Tokenizer::Open(tokenizer_path, config.bos_token_id, config.eos_token_id);
}

absl::StatusOr<std::vector<int64_t>> EvalInputIds(const std::string& text_file, const std::string& token_ids_file,
                                                  const EvalModel& model) {
  if (!token_ids_file.empty()) {
    auto sequences = runtime::ReadTokenIdFile(token_ids_file);
    if (!sequences.ok()) return sequences.status();
    std::vector<int64_t> ids;
    for (const auto& s : *sequences) ids.insert(ids.end(), s.begin(), s.end());
    return ids;  // pre-tokenized input is taken as is (BOS included by the producer)
  }
  auto tokenizer = OpenEvalTokenizer(model);
  if (!tokenizer.ok()) return tokenizer.status();
  auto text = runtime::ReadTextFile(text_file);
  if (!text.ok()) return text.status();
  return (*tokenizer)->EncodeWithBos(*text);
}

}  // namespace quark::cli
