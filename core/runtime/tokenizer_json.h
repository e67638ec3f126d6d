// A Hugging Face `tokenizer.json` (the tokenizers library's serialized pipeline) read in C++: added tokens split
// out first, then normalizer -> pre-tokenizer -> BPE model -> post-processor, and the decoder for Decode. With
// it, models that ship tokenizer.json only (Llama 3, Qwen2/2.5/3, Phi-3, Gemma, GPT-2, SmolLM, newer Mistral)
// can be calibrated and evaluated. tokenizer_config.json beside it, when present, gives bos/eos tokens,
// add_bos_token and the chat template.
//
// Supported: model BPE (both merges encodings, byte_fallback, ignore_merges, unk/fuse_unk); normalizers NFC, NFD,
// NFKC, NFKD, Lowercase, Prepend, Replace, Strip, Sequence; pre-tokenizers ByteLevel, Split (string or
// regex, every behavior, invert), Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence; post-processors
// TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence; decoders ByteLevel, Metaspace,
// Replace, ByteFallback, Fuse, Strip, Sequence. Added tokens honour lstrip/rstrip/normalized; single_word is
// not applied (transformers.js, the reference these ids are checked against, ignores it too).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::runtime {

namespace tokenizer_json {
class BpeModel;
class Normalizer;
class PreTokenizer;
class Decoder;
class AddedTokenMatcher;
}  // namespace tokenizer_json

class JsonTokenizer {
 public:
  /// `path`: a folder holding tokenizer.json, or the tokenizer.json file itself; tokenizer_config.json is read
  /// from the same folder when it exists. NotFound naming the file; InvalidArgument for malformed JSON (naming the
  /// file and byte offset) or a malformed field (naming its JSON path, e.g. "model.merges[3]"); Unimplemented
  /// naming an unsupported model, normalizer, pre-tokenizer, post-processor or decoder type.
  static absl::StatusOr<std::unique_ptr<JsonTokenizer>> Open(const std::string& path);
  /// The same from JSON text (`config_json` may be empty); `origin` prefixes error messages.
  static absl::StatusOr<std::unique_ptr<JsonTokenizer>> FromJson(std::string_view tokenizer_json,
                                                                 std::string_view config_json,
                                                                 const std::string& origin);
  ~JsonTokenizer();

  /// The ids of `text`; with `add_special_tokens` the post-processor's template is applied (HF's default
  /// encode: BOS for Llama 3, nothing for GPT-2), else none. InvalidArgument when `text` is not valid UTF-8
  /// (naming the byte offset). Thread-safe.
  absl::StatusOr<std::vector<int64_t>> Encode(std::string_view text, bool add_special_tokens) const;
  /// The text of `ids` through the decoder; special added tokens are skipped, unknown ids ignored.
  std::string Decode(const std::vector<int64_t>& ids) const;

  /// The id of a token (added tokens first, then the model's vocab); -1 when absent.
  int64_t TokenToId(std::string_view token) const;
  /// One past the largest id of the vocab and the added tokens.
  int64_t vocab_size() const;
  /// From tokenizer_config.json's bos_token / eos_token; -1 when unknown.
  int64_t bos_id() const { return bos_id_; }
  int64_t eos_id() const { return eos_id_; }
  /// tokenizer_config.json's chat_template ("default" of a named list); empty when absent.
  const std::string& chat_template() const { return chat_template_; }

 private:
  struct AddedToken;
  struct Section;
  JsonTokenizer();
  absl::Status ReadConfig(std::string_view config_json, const std::string& origin);
  absl::Status EncodeSection(std::string_view text, bool first_section, std::vector<int64_t>* ids) const;

  std::vector<AddedToken> added_;
  std::unique_ptr<tokenizer_json::AddedTokenMatcher> raw_matcher_;         // tokens matched before normalizing
  std::unique_ptr<tokenizer_json::AddedTokenMatcher> normalized_matcher_;  // tokens matched after normalizing
  std::unique_ptr<tokenizer_json::Normalizer> normalizer_;
  std::unique_ptr<tokenizer_json::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<tokenizer_json::BpeModel> model_;
  std::unique_ptr<tokenizer_json::Decoder> decoder_;
  std::vector<int64_t> template_prefix_;  // the post-processor's ids before the sequence
  std::vector<int64_t> template_suffix_;  // and after it
  bool has_post_processor_ = false;
  bool add_bos_token_ = false;  // tokenizer_config.json's, used only without a post-processor
  int64_t bos_id_ = -1;
  int64_t eos_id_ = -1;
  std::string chat_template_;
};

}  // namespace quark::runtime
