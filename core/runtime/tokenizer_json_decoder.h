// The decoders of a tokenizer.json (ids -> text) and the matcher that splits added tokens out of the text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace quark::runtime::tokenizer_json {

/// Turns token strings into text pieces (tokenizers' decode_chain); the pieces are concatenated at the end.
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const = 0;
};

/// nullptr for JSON null; Unimplemented naming an unsupported type; InvalidArgument naming `path`.field.
absl::StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const nlohmann::json& config, const std::string& path);

/// Leftmost-longest matching of a fixed set of strings (the added tokens), as tokenizers' Aho-Corasick
/// (MatchKind::LeftmostLongest) and transformers.js's trie both do.
class AddedTokenMatcher {
 public:
  /// `value` is returned with each match (the index of the added token).
  void Add(const std::string& content, int value);
  struct Piece {
    std::string_view text;
    int value;  // -1 for text between matches
  };
  /// `text` cut into matches and the (non-empty) text between them, in order.
  std::vector<Piece> Split(std::string_view text) const;
  bool empty() const { return count_ == 0; }

 private:
  // By first byte: (content, value), longest first.
  std::vector<std::pair<std::string, int>> by_first_byte_[256];
  int count_ = 0;
};

}  // namespace quark::runtime::tokenizer_json
