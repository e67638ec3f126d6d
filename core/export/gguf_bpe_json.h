// What gguf_bpe_vocab.cc and gguf_bpe_special.cc share: reading a bounded JSON file and the converter's SpecialVocab.
// Internal to core/export (nlohmann-json in the interface).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/export/gguf_bpe_vocab.h"

namespace quark::exporter::gguf::bpe {

using Json = nlohmann::json;

/// `path` parsed; NOT_FOUND naming it when absent, INVALID_ARGUMENT naming it and the byte offset when malformed,
/// or its size when over kMaxTokenizerFileBytes.
absl::StatusOr<Json> ReadJsonFile(const std::string& path);

/// gguf-py's SpecialVocab(dir, load_merges=True) minus the merges: the special token ids from tokenizer_config.json's
/// <type>_token (looked up among `tokenizer`'s added_tokens) and then config.json's <type>_token_id, the
/// add_<type>_token flags from the post-processor and tokenizer_config.json, and the chat template, into `vocab`.
/// `tokenizer` is the parsed tokenizer.json of `model_dir`. INVALID_ARGUMENT naming the file and field for a negative
/// id or one outside the vocabulary.
absl::Status ReadSpecialVocab(const std::string& model_dir, const Json& tokenizer, BpeVocab& vocab);

}  // namespace quark::exporter::gguf::bpe
