// A GGUF file as the runtime's weight source, so that `quark eval --model FILE.gguf` streams it like an HF folder:
// the config from the GGUF metadata, each tensor dequantized to float (Q8_0, Q4_0, Q4_1, F16, BF16, F32) under its
// HF name, with Q/K rows put back into HF's rotate-half order. A deepseek2 file (gguf_deepseek.h) is read whole when
// opened (kv_b_proj joined back from attn_k_b/attn_v_b, the expert stacks split): its weights are held in float; so are
// gpt-oss and llama4 files (#32: gguf_gpt_oss.h, gguf_llama4.h).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/export/gguf_file.h"
#include "core/runtime/weight_source.h"

namespace quark::exporter {

/// True when `path` is a regular file starting with GGUF's magic.
bool IsGgufFile(const std::string& path);

class GgufWeightSource : public runtime::WeightSource {
 public:
  /// Opens and parses `path` and derives its ModelConfig (errors of GgufFile::Open and ModelConfigFromGguf).
  static absl::StatusOr<std::shared_ptr<GgufWeightSource>> Open(const std::string& path);

  const checkpoint::ModelConfig& config() const { return config_; }
  const gguf::GgufFile& file() const { return *file_; }

  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  bool Has(const std::string& name) const override;
  std::string Location() const override { return file_->path(); }

 private:
  GgufWeightSource() = default;
  std::unique_ptr<gguf::GgufFile> file_;
  checkpoint::ModelConfig config_;
  std::shared_ptr<const runtime::WeightSource> whole_;  // deepseek2: every weight, dequantized at Open
};

/// The tokenizer next to a GGUF file, checked to hold exactly the GGUF's vocabulary: for a SentencePiece ("llama")
/// GGUF its tokenizer.model (tokenizer.ggml.tokens, scores and token types; pieces past it must be the converter's
/// unused padding), for a BPE ("gpt2") one its tokenizer.json (tokens, token types and merges as ReadBpeVocab writes
/// them). NOT_FOUND naming the path when there is none; INVALID_ARGUMENT naming the first token that differs.
absl::StatusOr<std::string> GgufTokenizerModel(const gguf::GgufFile& file);

}  // namespace quark::exporter
