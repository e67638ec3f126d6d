// Text to token ids: a SentencePiece `tokenizer.model` (Llama 2 family) or a Hugging Face `tokenizer.json`
// (Llama 3, Qwen2/3, Phi-3, Gemma, GPT-2, SmolLM, newer Mistral; see tokenizer_json.h), with BOS/EOS from
// config.json.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::runtime {

class SentencePieceAdapter;
class JsonTokenizer;

class Tokenizer {
 public:
  /// Loads `path`: a tokenizer.model or tokenizer.json file, or a model folder holding one. A folder with both
  /// opens tokenizer.model (the format the engine has always read for Llama 2 / Mistral, so their ids and
  /// perplexities do not move); a folder with tokenizer.json only opens that, with tokenizer_config.json beside
  /// it. `bos_id`/`eos_id` override the tokenizer's own (pass config.json's; -1 keeps the tokenizer's).
  /// NotFound naming the path when neither file exists; InvalidArgument / Unimplemented from the reader.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Open(const std::string& path, int64_t bos_id = -1, int64_t eos_id = -1);
  ~Tokenizer();

  /// The pieces of `text` (no BOS/EOS).
  absl::StatusOr<std::vector<int64_t>> Encode(const std::string& text) const;
  /// SentencePiece: [BOS] + Encode(text) (no BOS when the tokenizer has none). tokenizer.json: what Hugging Face
  /// encodes with add_special_tokens, i.e. the post-processor's template (BOS for Llama 3, none for GPT-2 or
  /// Qwen2), or BOS when tokenizer_config.json sets add_bos_token and there is no post-processor.
  absl::StatusOr<std::vector<int64_t>> EncodeWithBos(const std::string& text) const;
  std::string Decode(const std::vector<int64_t>& ids) const;

  int64_t bos_id() const { return bos_id_; }
  int64_t eos_id() const { return eos_id_; }
  int64_t vocab_size() const;

 private:
  Tokenizer();
  std::unique_ptr<SentencePieceAdapter> processor_;  // one of these two is set
  std::unique_ptr<JsonTokenizer> json_;
  int64_t bos_id_ = -1;
  int64_t eos_id_ = -1;
};

/// Reads a token-id file: decimal ids separated by whitespace or commas; each non-empty line is one
/// sequence. InvalidArgument naming the line and the bad text.
absl::StatusOr<std::vector<std::vector<int64_t>>> ReadTokenIdFile(const std::string& path);

/// Reads a whole file into a string (NotFound naming the path).
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace quark::runtime
