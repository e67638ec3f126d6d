// The text stages of a tokenizer.json: normalizers (NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace, Strip,
// Sequence) and pre-tokenizers (ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence),
// built from their JSON objects with the semantics of Hugging Face tokenizers (Rust).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace quark::runtime::tokenizer_json {

/// Rewrites one section of text (a span between added tokens).
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual absl::StatusOr<std::string> Normalize(std::string text) const = 0;
};

/// Splits pieces further (and may rewrite them). `first_section` is true for the text before any added token
/// (Metaspace's prepend_scheme "first" prepends only there).
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual std::vector<std::string> Split(std::vector<std::string> pieces, bool first_section) const = 0;
};

/// nullptr for JSON null. `path` names the object in errors ("normalizer", "pre_tokenizer.pretokenizers[1]").
/// InvalidArgument for a malformed object (naming the path and field), Unimplemented for an unknown type.
absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const nlohmann::json& config, const std::string& path);
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const nlohmann::json& config, const std::string& path);

/// The ByteLevel pre-tokenizer's split regex (GPT-2's).
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Typed access to JSON fields; every error names `path`.field.
absl::StatusOr<std::string> GetString(const nlohmann::json& object, const char* field, const std::string& path);
absl::StatusOr<bool> GetBool(const nlohmann::json& object, const char* field, bool fallback, const std::string& path);
/// The object's "type" string.
absl::StatusOr<std::string> GetType(const nlohmann::json& object, const std::string& path);

}  // namespace quark::runtime::tokenizer_json
