#include "core/eval/opened_model.h"

#include "core/export/ct_source.h"
#include "core/quantize/reload.h"

namespace quark::eval {
namespace {

// An HF folder whose config.json carries quantization_config.quant_method "quark" (our export, or Quark's) or
// "compressed-tensors" (#30 item 2: ours, or llm-compressor's).
bool IsQuarkExport(const std::string& dir) {
  const std::string method = exporter::ExportQuantMethod(dir);
  return method == "quark" || method == "compressed-tensors";
}

}  // namespace

absl::StatusOr<OpenedModel> OpenModel(const std::string& model, const runtime::StreamerOptions& options) {
  OpenedModel out;
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

absl::StatusOr<std::unique_ptr<runtime::Tokenizer>> OpenModelTokenizer(const OpenedModel& model) {
  const checkpoint::ModelConfig& config = model.streamer->config();
  std::string tokenizer_path = model.tokenizer;
  if (model.gguf) {
    auto path = exporter::GgufTokenizerModel(model.gguf->file());
    if (!path.ok()) return path.status();
    tokenizer_path = *path;
  }
  return runtime::Tokenizer::Open(tokenizer_path, config.bos_token_id, config.eos_token_id);
}

}  // namespace quark::eval
