#include "core/export/gguf_vocab.h"

#include <cstring>
#include <filesystem>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/runtime/tokenizer.h"

namespace quark::exporter::gguf {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// Reads one message's fields; every error names the byte offset within the file.
class WireReader {
 public:
  WireReader(const std::string& data, size_t begin, size_t end) : data_(data), pos_(begin), end_(end) {}
  bool done() const { return pos_ >= end_; }
  size_t pos() const { return pos_; }

  absl::StatusOr<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= end_) return Bad("truncated varint");
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return Bad("varint longer than 10 bytes");
  }
  // A field's tag; `length` is set for length-delimited fields (their payload starts at pos()).
  absl::StatusOr<std::pair<uint32_t, int>> Tag() {
    QUARK_ASSIGN_OR_RETURN(const uint64_t tag, Varint());
    return std::make_pair(static_cast<uint32_t>(tag >> 3), static_cast<int>(tag & 7));
  }
  absl::StatusOr<std::pair<size_t, size_t>> Payload() {
    QUARK_ASSIGN_OR_RETURN(const uint64_t n, Varint());
    if (n > end_ - pos_) return Bad("length-delimited field runs past its message");
    const size_t begin = pos_;
    pos_ += n;
    return std::make_pair(begin, begin + n);
  }
  absl::StatusOr<float> Fixed32() {
    if (end_ - pos_ < 4) return Bad("truncated fixed32");
    float f;
    std::memcpy(&f, data_.data() + pos_, 4);
    pos_ += 4;
    return f;
  }
  absl::Status Skip(int wire_type) {
    switch (wire_type) {
      case kVarint: return Varint().status();
      case kFixed64:
        if (end_ - pos_ < 8) return Bad("truncated fixed64");
        pos_ += 8;
        return absl::OkStatus();
      case kLengthDelimited: return Payload().status();
      case kFixed32: return Fixed32().status();
      default: return Bad(StrCat("wire type ", wire_type, " is not supported"));
    }
  }
  absl::Status Bad(const std::string& what) const {
    return absl::InvalidArgumentError(StrCat("byte ", pos_, ": ", what));
  }

 private:
  const std::string& data_;
  size_t pos_, end_;
};

// message SentencePiece { string piece = 1; float score = 2; Type type = 3; }
absl::Status ReadPiece(const std::string& data, std::pair<size_t, size_t> range, SentencePieceVocab& vocab) {
  WireReader r(data, range.first, range.second);
  std::string piece;
  float score = 0;
  int32_t type = static_cast<int32_t>(PieceType::kNormal);
  while (!r.done()) {
    QUARK_ASSIGN_OR_RETURN(const auto tag, r.Tag());
    if (tag.first == 1 && tag.second == kLengthDelimited) {
      QUARK_ASSIGN_OR_RETURN(const auto p, r.Payload());
      piece = data.substr(p.first, p.second - p.first);
    } else if (tag.first == 2 && tag.second == kFixed32) {
      QUARK_ASSIGN_OR_RETURN(score, r.Fixed32());
    } else if (tag.first == 3 && tag.second == kVarint) {
      QUARK_ASSIGN_OR_RETURN(const uint64_t t, r.Varint());
      if (t < 1 || t > 6) return r.Bad(StrCat("piece type ", t, " is not one of 1..6"));
      type = static_cast<int32_t>(t);
    } else {
      QUARK_RETURN_IF_ERROR(r.Skip(tag.second));
    }
  }
  vocab.pieces.push_back(std::move(piece));
  vocab.scores.push_back(score);
  vocab.types.push_back(static_cast<PieceType>(type));
  return absl::OkStatus();
}

// message TrainerSpec { ... int32 unk_id = 40; bos_id = 41; eos_id = 42; pad_id = 43; }
absl::Status ReadTrainerSpec(const std::string& data, std::pair<size_t, size_t> range, SentencePieceVocab& vocab) {
  WireReader r(data, range.first, range.second);
  while (!r.done()) {
    QUARK_ASSIGN_OR_RETURN(const auto tag, r.Tag());
    if (tag.second == kVarint && tag.first >= 40 && tag.first <= 43) {
      QUARK_ASSIGN_OR_RETURN(const uint64_t v, r.Varint());
      const int32_t id = static_cast<int32_t>(static_cast<int64_t>(v));  // negative int32 are sign-extended
      if (tag.first == 40) vocab.unk_id = id;
      if (tag.first == 41) vocab.bos_id = id;
      if (tag.first == 42) vocab.eos_id = id;
      if (tag.first == 43) vocab.pad_id = id;
    } else {
      QUARK_RETURN_IF_ERROR(r.Skip(tag.second));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SentencePieceVocab> ReadSentencePieceVocab(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(StrCat("tokenizer: ", path, " does not exist"));
  }
  QUARK_ASSIGN_OR_RETURN(const std::string data, runtime::ReadTextFile(path));
  SentencePieceVocab vocab;
  // message ModelProto { repeated SentencePiece pieces = 1; TrainerSpec trainer_spec = 2; ... }
  WireReader r(data, 0, data.size());
  absl::Status status;
  while (status.ok() && !r.done()) {
    auto tag = r.Tag();
    if (!tag.ok()) {
      status = tag.status();
      break;
    }
    if ((tag->first == 1 || tag->first == 2) && tag->second == kLengthDelimited) {
      auto payload = r.Payload();
      if (!payload.ok()) {
        status = payload.status();
        break;
      }
      status = tag->first == 1 ? ReadPiece(data, *payload, vocab) : ReadTrainerSpec(data, *payload, vocab);
    } else {
      status = r.Skip(tag->second);
    }
  }
  if (status.ok() && vocab.pieces.empty()) status = absl::InvalidArgumentError("byte 0: no pieces");
  if (!status.ok()) {
    return absl::InvalidArgumentError(StrCat("tokenizer: ", path, " is not a SentencePiece model: ", std::string(status.message())));
  }
  return vocab;
}

absl::StatusOr<GgufVocab> ReadModelVocab(const std::string& model_dir, int64_t vocab_size,
                                         const std::string& model_type) {
  const std::filesystem::path dir(model_dir);
  const std::string sentencepiece = (dir / "tokenizer.model").string(), bpe = (dir / "tokenizer.json").string();
  std::error_code ec;
  if (std::filesystem::is_regular_file(sentencepiece, ec)) {
    auto vocab = ReadSentencePieceVocab(sentencepiece);
    if (!vocab.ok()) return absl::InvalidArgumentError(std::string(vocab.status().message()));
    if (static_cast<int64_t>(vocab->pieces.size()) > vocab_size) {
      return absl::InvalidArgumentError(
          StrCat(sentencepiece, ": ", vocab->pieces.size(), " pieces, more than vocab_size = ", vocab_size));
    }
    return GgufVocab(*std::move(vocab));
  }
  if (!std::filesystem::is_regular_file(bpe, ec)) {
    return absl::InvalidArgumentError(StrCat("tokenizer: ", model_dir, " has neither tokenizer.model (SentencePiece) "
                                             "nor tokenizer.json (BPE): GGUF needs the vocabulary"));
  }
  QUARK_ASSIGN_OR_RETURN(BpeVocab vocab, ReadBpeVocab(model_dir, vocab_size, model_type));
  return GgufVocab(std::move(vocab));
}

absl::Status CheckVocabFits(const GgufVocab& vocab, int64_t vocab_size, const std::string& who) {
  if (const SentencePieceVocab* spm = vocab.sentencepiece()) {
    if (static_cast<int64_t>(spm->pieces.size()) > vocab_size) {
      return absl::InvalidArgumentError(StrCat(who, ": the tokenizer has ", spm->pieces.size(),
                                               " pieces, more than vocab_size = ", vocab_size));
    }
  } else if (static_cast<int64_t>(vocab.bpe()->tokens.size()) != vocab_size) {
    return absl::InvalidArgumentError(StrCat(who, ": the BPE vocabulary was read for ", vocab.bpe()->tokens.size(),
                                             " tokens, but vocab_size = ", vocab_size));
  }
  return absl::OkStatus();
}

int32_t GgufTokenType(PieceType type) {
  switch (type) {
    case PieceType::kUnknown: return 2;
    case PieceType::kControl: return 3;
    case PieceType::kUnused: return 5;
    case PieceType::kByte: return 6;
    default: return 1;  // normal and user-defined
  }
}

}  // namespace quark::exporter::gguf
