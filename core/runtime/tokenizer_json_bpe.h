// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}): vocab, merges in either encoding
// (["a b", ...] or [["a", "b"], ...]), unk_token / fuse_unk, byte_fallback (<0xXX> pieces), ignore_merges,
// continuing_subword_prefix and end_of_word_suffix, with the merge order of Hugging Face tokenizers: the
// lowest-ranked adjacent pair first, leftmost among equals.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace quark::runtime::tokenizer_json {

class BpeModel {
 public:
  /// InvalidArgument naming the JSON path ("model.merges[12]") for a malformed model; Unimplemented naming the
  /// type for a model that is not BPE (WordPiece, Unigram, WordLevel).
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model, const std::string& path);

  /// Appends the ids of one pre-tokenized word. Thread-safe (the model is immutable).
  void Tokenize(std::string_view word, std::vector<int64_t>* ids) const;

  /// -1 when absent.
  int64_t TokenToId(std::string_view token) const;
  /// The vocab's token for `id`; empty when there is none.
  const std::string& IdToToken(int64_t id) const;
  /// One past the largest id in the vocab.
  int64_t size() const { return static_cast<int64_t>(id_to_token_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  BpeModel() = default;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  absl::Status AddMerges(const nlohmann::json& merges, const std::string& path);
  // The initial symbols of `word`: vocab characters, byte pieces or unk.
  std::vector<int32_t> InitialSymbols(std::string_view word) const;
  void MergeAll(std::vector<int32_t>* symbols) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  int32_t byte_ids_[256] = {};
  bool all_bytes_present_ = false;
};

}  // namespace quark::runtime::tokenizer_json
