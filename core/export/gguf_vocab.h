// The vocabulary of a SentencePiece `tokenizer.model` (a serialized sentencepiece.ModelProto), read with a small
// protobuf wire-format reader: the project's SentencePiece adapter encodes and decodes but does not expose pieces,
// scores or types, and linking libsentencepiece's protobuf into the engine is what sentencepiece_module.cc avoids.
// GGUF's tokenizer.ggml.* keys are written from it as llama.cpp's convert_hf_to_gguf.py writes them.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/export/gguf_bpe_vocab.h"

namespace quark::exporter::gguf {

/// SentencePiece piece types (sentencepiece_model.proto).
enum class PieceType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct SentencePieceVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<PieceType> types;
  // TrainerSpec ids (proto defaults when absent).
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t pad_id = -1;
};

/// Reads `path`. NOT_FOUND naming the path when it is missing; INVALID_ARGUMENT naming the byte offset when it is
/// not a SentencePiece model (bad wire format, no pieces).
absl::StatusOr<SentencePieceVocab> ReadSentencePieceVocab(const std::string& path);

/// GGUF token type of a piece, as convert_hf_to_gguf.py assigns it (user-defined pieces count as normal).
int32_t GgufTokenType(PieceType type);

/// A model's vocabulary as its GGUF carries it: SentencePiece (tokenizer.ggml.model "llama") or a Hugging Face
/// byte-level BPE (tokenizer.ggml.model "gpt2"). Implicit from either, so writers take both through one parameter.
class GgufVocab {
 public:
  GgufVocab() = default;  // an empty SentencePiece vocabulary
  GgufVocab(SentencePieceVocab sentencepiece) : vocab_(std::move(sentencepiece)) {}  // NOLINT(runtime/explicit)
  GgufVocab(BpeVocab bpe) : vocab_(std::move(bpe)) {}                                // NOLINT(runtime/explicit)
  const SentencePieceVocab* sentencepiece() const { return std::get_if<SentencePieceVocab>(&vocab_); }
  const BpeVocab* bpe() const { return std::get_if<BpeVocab>(&vocab_); }

 private:
  std::variant<SentencePieceVocab, BpeVocab> vocab_;
};

/// The vocabulary of `model_dir` for a model of `vocab_size` tokens: tokenizer.model when present (SentencePiece, as
/// convert_hf_to_gguf.py tries it first), else tokenizer.json (ReadBpeVocab, `model_type` naming the family).
/// INVALID_ARGUMENT naming the file when neither is there, when it is unreadable, or when it holds more tokens than
/// vocab_size; UNIMPLEMENTED from ReadBpeVocab for a tokenizer llama.cpp cannot reproduce.
absl::StatusOr<GgufVocab> ReadModelVocab(const std::string& model_dir, int64_t vocab_size,
                                         const std::string& model_type);

/// INVALID_ARGUMENT ("`who`: the tokenizer has N pieces, more than vocab_size = V") when `vocab` does not fit a model
/// of `vocab_size` tokens (a BPE vocabulary must have been read for exactly that size).
absl::Status CheckVocabFits(const GgufVocab& vocab, int64_t vocab_size, const std::string& who);

}  // namespace quark::exporter::gguf
