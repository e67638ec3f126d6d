// Text to token ids: SentencePiece `tokenizer.model` (Llama family), with BOS/EOS from config.json.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::runtime {

class SentencePieceAdapter;

class Tokenizer {
 public:
  /// Loads `path`: a tokenizer.model file, or a model folder holding one. `bos_id`/`eos_id` override the
  /// SentencePiece model's own (pass config.json's; -1 keeps the model's). NotFound / InvalidArgument naming
  /// the path.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Open(const std::string& path, int64_t bos_id = -1, int64_t eos_id = -1);
  ~Tokenizer();

  /// The pieces of `text` (no BOS/EOS).
  absl::StatusOr<std::vector<int64_t>> Encode(const std::string& text) const;
  /// [BOS] + Encode(text) (no BOS when the tokenizer has none).
  absl::StatusOr<std::vector<int64_t>> EncodeWithBos(const std::string& text) const;
  std::string Decode(const std::vector<int64_t>& ids) const;

  int64_t bos_id() const { return bos_id_; }
  int64_t eos_id() const { return eos_id_; }
  int64_t vocab_size() const;

 private:
  Tokenizer();
  std::unique_ptr<SentencePieceAdapter> processor_;
  int64_t bos_id_ = -1;
  int64_t eos_id_ = -1;
};

/// Reads a token-id file: decimal ids separated by whitespace or commas; each non-empty line is one
/// sequence. InvalidArgument naming the line and the bad text.
absl::StatusOr<std::vector<std::vector<int64_t>>> ReadTokenIdFile(const std::string& path);

/// Reads a whole file into a string (NotFound naming the path).
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace quark::runtime
