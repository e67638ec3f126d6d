// A model to evaluate, opened by what its path holds: an HF folder (float, or an HF-quark export read back with its
// activation quantization), or a GGUF file dequantized on load, with the tokenizer that goes with it. `quark eval`
// and the worker's job evaluation (model_evaluation.h) open models through it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/export/gguf_source.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/tokenizer.h"

namespace quark::eval {

/// An HF folder holds its tokenizer.model; a GGUF file takes the tokenizer.model beside it, checked to hold exactly
/// the GGUF's vocabulary.
struct OpenedModel {
  std::unique_ptr<runtime::LayerStreamer> streamer;
  runtime::LayerHooks hooks;  // an HF-quark export's activation / KV-cache quantization
  std::string tokenizer;
  std::shared_ptr<exporter::GgufWeightSource> gguf;
};

/// Errors of the reader that applies (config.json, safetensors, GGUF) pass through, naming the file.
absl::StatusOr<OpenedModel> OpenModel(const std::string& model, const runtime::StreamerOptions& options = {});

/// The model's tokenizer (config.json's BOS / EOS).
absl::StatusOr<std::unique_ptr<runtime::Tokenizer>> OpenModelTokenizer(const OpenedModel& model);

}  // namespace quark::eval
