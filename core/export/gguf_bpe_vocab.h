// The vocabulary of a Hugging Face `tokenizer.json` byte-level BPE (what Llama 3/4, gpt-oss, Qwen2/3 and DeepSeek-V3
// checkpoints ship instead of a SentencePiece tokenizer.model), turned into GGUF's tokenizer.ggml.* keys the way
// llama.cpp's converter does it: `_set_vocab_gpt2` = `get_vocab_base` (tokens padded to config.json's vocab_size,
// token types) + `get_vocab_base_pre` (tokenizer.ggml.pre) + gguf-py's `SpecialVocab` (merges, special token ids,
// add_*_token flags, chat template), for llama.cpp's `tokenizer.ggml.model = "gpt2"` reader (src/llama-vocab.cpp).
//
// One deliberate difference: the converter names the pre-tokenizer by hashing the ids its tokenizer gives a fixed
// text, which needs the real vocabulary of a known release. Here it is named from the pre-tokenizer itself: its split
// regexes are compared with the ones llama.cpp applies for each name (llama-vocab.cpp quotes the tokenizer.json
// originals), and the family (config.json's model_type) picks among names llama.cpp treats alike. So a re-trained or
// cut vocabulary behind Llama 3's splitter is still "llama-bpe"; a splitter llama.cpp has no name for is refused.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/export/gguf_file.h"

namespace quark::exporter::gguf {

/// GGUF token types (gguf-py's TokenType).
enum class GgufTokenKind : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5 };

/// Bounds on what a tokenizer.json may hold before any of it is used (the largest real vocabularies, Llama 4's and
/// gpt-oss's, have ~202k tokens, ~450k merges and a ~30 MB file).
inline constexpr int64_t kMaxBpeTokens = int64_t{1} << 22;
inline constexpr int64_t kMaxBpeMerges = int64_t{1} << 23;
inline constexpr int64_t kMaxBpeTokenBytes = 4096;
inline constexpr int64_t kMaxTokenizerFileBytes = int64_t{1} << 30;

struct BpeVocab {
  std::string pre;                          // tokenizer.ggml.pre
  std::vector<std::string> tokens;          // vocab_size entries; ids the tokenizer lacks are "[PAD<i>]"
  std::vector<GgufTokenKind> types;         // one per token
  std::vector<std::string> merges;          // "left right", rank order
  int64_t defined = 0;                      // tokens the tokenizer defines (the rest are padding)
  // SpecialVocab's special_token_ids and add_special_token, by type ("bos", "eos", "unk", "sep", "pad", "cls",
  // "mask", "eot", "eom"), in the order the converter sets them.
  std::vector<std::pair<std::string, int64_t>> special_ids;
  std::vector<std::pair<std::string, bool>> add_special;
  std::string chat_template;                // empty when none
};

/// Reads `model_dir`/tokenizer.json (with tokenizer_config.json, chat_template.jinja and config.json beside it, as
/// SpecialVocab does) for a model of `vocab_size` tokens whose config.json says `model_type`.
/// NOT_FOUND naming tokenizer.json when it is missing. INVALID_ARGUMENT naming the file and the byte offset for
/// malformed JSON, the file and the field (e.g. "model.merges[12]") for a value of the wrong kind, a size over the
/// bounds above, a merge whose parts are not tokens, an id at or past `vocab_size` or two tokens on one id.
/// UNIMPLEMENTED naming the file and the field for what llama.cpp's "gpt2" vocabulary cannot reproduce: a model other
/// than BPE, a normalizer other than none/NFC, a pre-tokenizer whose splits match none of llama.cpp's names.
absl::StatusOr<BpeVocab> ReadBpeVocab(const std::string& model_dir, int64_t vocab_size, const std::string& model_type);

/// tokenizer.ggml.model "gpt2", pre, tokens, token_type, merges, the special ids, add_*_token and
/// tokenizer.chat_template, in the converter's order.
void AppendBpeTokenizerMetadata(const BpeVocab& vocab, Metadata& md);

}  // namespace quark::exporter::gguf
