// The vocabulary of a SentencePiece `tokenizer.model` (a serialized sentencepiece.ModelProto), read with a small
// protobuf wire-format reader: the project's SentencePiece adapter encodes and decodes but does not expose pieces,
// scores or types, and linking libsentencepiece's protobuf into the engine is what sentencepiece_module.cc avoids.
// GGUF's tokenizer.ggml.* keys are written from it as llama.cpp's convert_hf_to_gguf.py writes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

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

}  // namespace quark::exporter::gguf
