#include "core/export/gguf_bpe_vocab.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/export/gguf_bpe_json.h"

namespace quark::exporter::gguf {
namespace bpe {

absl::StatusOr<Json> ReadJsonFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return absl::NotFoundError(StrCat(path, " does not exist"));
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec || bytes > static_cast<uintmax_t>(kMaxTokenizerFileBytes)) {
    return absl::InvalidArgumentError(StrCat(path, ": ", bytes, " bytes, more than the ", kMaxTokenizerFileBytes,
                                             " a tokenizer file may have"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return absl::InvalidArgumentError(StrCat(path, ": cannot be read"));
  const std::string data = text.str();
  try {
    return Json::parse(data.begin(), data.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(StrCat(path, ": malformed JSON at byte offset ", e.byte, ": ", e.what()));
  } catch (const Json::out_of_range& e) {  // a number no double holds
    return absl::InvalidArgumentError(StrCat(path, ": malformed JSON: ", e.what()));
  }
}

}  // namespace bpe

namespace {

using bpe::Json;

// The split regexes llama.cpp applies per tokenizer.ggml.pre (src/llama-vocab.cpp quotes these tokenizer.json
// originals above its adapted forms), as they read once the JSON string is decoded.
const char kLlama3Split[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char kQwen2Split[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
// o200k: gpt-4o's, gpt-oss's (o200k_harmony) and Llama 4's splitter.
const char kO200kSplit[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// DeepSeek-V3's three splits (numbers, CJK runs, the rest); the third holds real CR/LF characters.
const char kDeepseekV3Numbers[] = "\\p{N}{1,3}";
const char kDeepseekV3Cjk[] = "[一-龥぀-ゟ゠-ヿ]+";
const char kDeepseekV3Rest[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|"
    "\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
// ByteLevel's own regex (use_regex true): GPT-2's.
const char kByteLevelOwnRegex[] = "<ByteLevel regex>";

struct PreTokenizerName {
  std::vector<std::string> splits;
  const char* name;                                        // convert_hf_to_gguf.py's name for the reference release
  std::vector<std::pair<std::string, std::string>> by_family;  // model_type -> the name that family's release hashes to
};

const std::vector<PreTokenizerName>& PreTokenizerNames() {
  static const auto* names = new std::vector<PreTokenizerName>{
      {{kLlama3Split}, "llama-bpe", {}},
      {{kO200kSplit}, "gpt-4o", {{"llama4", "llama4"}, {"llama4_text", "llama4"}}},
      {{kQwen2Split}, "qwen2", {}},
      {{kDeepseekV3Numbers, kDeepseekV3Cjk, kDeepseekV3Rest}, "deepseek-v3", {}},
      {{kByteLevelOwnRegex}, "gpt-2", {}},
  };
  return *names;
}

absl::Status Unnamed(const std::string& file, const std::string& field, const std::string& why) {
  return absl::UnimplementedError(StrCat(file, ": ", field, ": ", why,
                                         "; llama.cpp names no pre-tokenizer for it (GGUF needs tokenizer.ggml.pre)"));
}

// The splits of `pre` (a Sequence of Split stages ending in ByteLevel without its regex, or a lone ByteLevel with
// it), matched against llama.cpp's names.
absl::StatusOr<std::string> NamePreTokenizer(const Json& tok, const std::string& file, const std::string& model_type) {
  if (!tok.contains("pre_tokenizer") || !tok["pre_tokenizer"].is_object()) {
    return Unnamed(file, "pre_tokenizer", "absent");
  }
  const Json& pre = tok["pre_tokenizer"];
  std::vector<std::pair<const Json*, std::string>> stages;
  if (pre.value("type", "") == "Sequence") {
    if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) {
      return absl::InvalidArgumentError(StrCat(file, ": pre_tokenizer.pretokenizers is not a list"));
    }
    for (size_t i = 0; i < pre["pretokenizers"].size(); ++i) {
      stages.emplace_back(&pre["pretokenizers"][i], StrCat("pre_tokenizer.pretokenizers[", i, "]"));
    }
  } else {
    stages.emplace_back(&pre, "pre_tokenizer");
  }
  if (stages.empty()) return Unnamed(file, "pre_tokenizer", "an empty Sequence");
  const auto& [last, last_field] = stages.back();
  if (!last->is_object() || last->value("type", "") != "ByteLevel") {
    return Unnamed(file, last_field, "the last stage is not ByteLevel (not a byte-level BPE)");
  }
  if (last->value("add_prefix_space", false)) {
    return Unnamed(file, last_field + ".add_prefix_space", "true (llama.cpp's byte-level BPE adds no space)");
  }
  std::vector<std::string> splits;
  for (size_t i = 0; i + 1 < stages.size(); ++i) {
    const auto& [stage, field] = stages[i];
    if (!stage->is_object() || stage->value("type", "") != "Split") {
      return Unnamed(file, field + ".type", StrCat("\"", stage->is_object() ? stage->value("type", "") : "", "\""));
    }
    if (stage->value("behavior", "") != "Isolated" || stage->value("invert", false)) {
      return Unnamed(file, field, "a Split that does not isolate its matches");
    }
    const Json& pattern = stage->value("pattern", Json());
    if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
      return Unnamed(file, field + ".pattern", "not a Regex");
    }
    splits.push_back(pattern["Regex"].get<std::string>());
  }
  if (last->value("use_regex", true)) {
    if (!splits.empty()) return Unnamed(file, last_field + ".use_regex", "true after Split stages");
    splits.push_back(kByteLevelOwnRegex);
  }
  for (const PreTokenizerName& candidate : PreTokenizerNames()) {
    if (candidate.splits != splits) continue;
    for (const auto& [family, name] : candidate.by_family) {
      if (family == model_type) return std::string(name);
    }
    return std::string(candidate.name);
  }
  return Unnamed(file, "pre_tokenizer", "its Split regexes are none of llama-bpe, gpt-4o/llama4, qwen2, deepseek-v3");
}

// The converter reads normalizers only for Lowercase/StripAccents flags; llama.cpp's gpt2 vocabulary applies none.
// NFC changes no text that is already composed, so it passes (Qwen2's); anything else would tokenize differently.
absl::Status CheckNormalizer(const Json& tok, const std::string& file) {
  const Json& n = tok.value("normalizer", Json());
  if (n.is_null()) return absl::OkStatus();
  const std::string type = n.is_object() ? n.value("type", "") : "";
  if (type == "NFC") return absl::OkStatus();
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array() && n["normalizers"].empty()) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(StrCat(file, ": normalizer.type \"", type,
                                         "\": llama.cpp's byte-level BPE applies no normalizer"));
}

absl::Status CheckTokenBytes(const std::string& token, const std::string& file, const std::string& field) {
  if (static_cast<int64_t>(token.size()) > kMaxBpeTokenBytes) {
    return absl::InvalidArgumentError(StrCat(file, ": ", field, ": a token of ", token.size(), " bytes, more than ",
                                             kMaxBpeTokenBytes));
  }
  return absl::OkStatus();
}

// convert_hf_to_gguf.py's does_token_look_special.
bool LooksSpecial(const std::string& t) {
  auto wrapped = [&](const std::string& open, const std::string& close) {
    return t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xef\xbd\x9c", "\xef\xbd\x9c>") || wrapped("<unused", ">");
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

struct ModelVocab {
  std::unordered_map<std::string, int64_t> ids;
};

// model.vocab and added_tokens into vocab.tokens/types (get_vocab_base).
absl::StatusOr<ModelVocab> ReadTokens(const Json& tok, const std::string& file, int64_t vocab_size, BpeVocab& vocab) {
  const Json& model = tok["model"];
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return absl::InvalidArgumentError(StrCat(file, ": model.vocab is not an object"));
  }
  const Json& entries = model["vocab"];
  if (static_cast<int64_t>(entries.size()) > kMaxBpeTokens) {
    return absl::InvalidArgumentError(StrCat(file, ": model.vocab has ", entries.size(), " tokens, more than ",
                                             kMaxBpeTokens));
  }
  ModelVocab model_vocab;
  std::vector<std::optional<std::string>> by_id(vocab_size);
  auto place = [&](const std::string& token, const Json& id, const std::string& token_field,
                   const std::string& field) -> absl::Status {
    QUARK_RETURN_IF_ERROR(CheckTokenBytes(token, file, token_field));
    if (!id.is_number_integer()) return absl::InvalidArgumentError(StrCat(file, ": ", field, " is not an integer id"));
    const int64_t i = id.get<int64_t>();
    if (i < 0 || i >= vocab_size) {
      return absl::InvalidArgumentError(StrCat(file, ": ", field, " = ", i, " is outside config.json's vocab_size ",
                                               vocab_size));
    }
    if (by_id[i] && *by_id[i] != token) {
      return absl::InvalidArgumentError(StrCat(file, ": ", field, ": id ", i, " is already the token \"", *by_id[i],
                                               "\""));
    }
    by_id[i] = token;
    return absl::OkStatus();
  };
  for (const auto& [token, id] : entries.items()) {
    const std::string field = StrCat("model.vocab[\"", token.substr(0, 64), "\"]");
    QUARK_RETURN_IF_ERROR(place(token, id, field, field));
    model_vocab.ids.emplace(token, id.get<int64_t>());
  }
  // Added tokens: CONTROL when special or shaped like one, else USER_DEFINED with SentencePiece's U+2581 as a space.
  // (The converter also re-encodes tokens marked normalized: false and decodes them back; a byte-level BPE gives
  // its added tokens back unchanged, so that step is the identity here.)
  std::map<std::string, bool> added_special;  // content -> special
  const Json& added = tok.value("added_tokens", Json::array());
  if (!added.is_array()) return absl::InvalidArgumentError(StrCat(file, ": added_tokens is not a list"));
  if (static_cast<int64_t>(added.size()) > kMaxBpeTokens) {
    return absl::InvalidArgumentError(StrCat(file, ": added_tokens has ", added.size(), " entries"));
  }
  for (size_t k = 0; k < added.size(); ++k) {
    const std::string field = StrCat("added_tokens[", k, "]");
    const Json& a = added[k];
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id")) {
      return absl::InvalidArgumentError(StrCat(file, ": ", field, " has no string content and id"));
    }
    const std::string content = a["content"].get<std::string>();
    QUARK_RETURN_IF_ERROR(place(content, a["id"], field, field + ".id"));
    added_special.emplace(content, a.value("special", false));
  }
  vocab.tokens.resize(vocab_size);
  vocab.types.resize(vocab_size);
  for (int64_t i = 0; i < vocab_size; ++i) {
    if (!by_id[i]) {
      vocab.tokens[i] = StrCat("[PAD", i, "]");
      vocab.types[i] = GgufTokenKind::kUnused;
      continue;
    }
    ++vocab.defined;
    std::string token = *by_id[i];
    GgufTokenKind kind = GgufTokenKind::kNormal;
    if (auto it = added_special.find(token); it != added_special.end()) {
      if (it->second || LooksSpecial(token)) {
        kind = GgufTokenKind::kControl;
      } else {
        kind = GgufTokenKind::kUserDefined;
        token = ReplaceAll(token, "\xe2\x96\x81", " ");
      }
    }
    vocab.tokens[i] = std::move(token);
    vocab.types[i] = kind;
  }
  return model_vocab;
}

// model.merges (either encoding) as GGUF's "left right" strings; each merge's parts and their join must be tokens
// (the tokenizers library refuses the file otherwise).
absl::Status ReadMerges(const Json& tok, const std::string& file, const ModelVocab& model_vocab, BpeVocab& vocab) {
  const Json& merges = tok["model"].value("merges", Json::array());
  if (!merges.is_array()) return absl::InvalidArgumentError(StrCat(file, ": model.merges is not a list"));
  if (static_cast<int64_t>(merges.size()) > kMaxBpeMerges) {
    return absl::InvalidArgumentError(StrCat(file, ": model.merges has ", merges.size(), " entries, more than ",
                                             kMaxBpeMerges));
  }
  vocab.merges.reserve(merges.size());
  for (size_t k = 0; k < merges.size(); ++k) {
    const std::string field = StrCat("model.merges[", k, "]");
    const Json& m = merges[k];
    std::string left, right, written;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == 0 || space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(StrCat(file, ": ", field, " = \"", s, "\" is not two tokens and a space"));
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
      written = s;
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
      // gguf-py writes a space inside a part as U+0120 (the byte-level alphabet's space) to keep one separator.
      written = StrCat(ReplaceAll(left, " ", "\xc4\xa0"), " ", ReplaceAll(right, " ", "\xc4\xa0"));
    } else {
      return absl::InvalidArgumentError(StrCat(file, ": ", field, " is neither \"a b\" nor [\"a\", \"b\"]"));
    }
    QUARK_RETURN_IF_ERROR(CheckTokenBytes(left + right, file, field));
    for (const std::string& part : {left, right, left + right}) {
      if (!model_vocab.ids.count(part)) {
        return absl::InvalidArgumentError(StrCat(file, ": ", field, ": \"", part, "\" is not in model.vocab"));
      }
    }
    vocab.merges.push_back(std::move(written));
  }
  if (vocab.merges.empty()) return absl::InvalidArgumentError(StrCat(file, ": model.merges is empty"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BpeVocab> ReadBpeVocab(const std::string& model_dir, int64_t vocab_size, const std::string& model_type) {
  const std::string file = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  QUARK_ASSIGN_OR_RETURN(const Json tok, bpe::ReadJsonFile(file));
  if (vocab_size <= 0 || vocab_size > kMaxBpeTokens) {
    return absl::InvalidArgumentError(StrCat(file, ": config.json's vocab_size ", vocab_size, " is not in [1, ",
                                             kMaxBpeTokens, "]"));
  }
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object()) {
    return absl::InvalidArgumentError(StrCat(file, ": no model object"));
  }
  // A field of another JSON type than the one read (`"special": "yes"`) throws from nlohmann's value(): named here.
  try {
    const std::string type = tok["model"].value("type", "");
    if (type != "BPE") {
      return absl::UnimplementedError(
          StrCat(file, ": model.type \"", type, "\": only a BPE model is a \"gpt2\" vocabulary"));
    }
    BpeVocab vocab;
    QUARK_RETURN_IF_ERROR(CheckNormalizer(tok, file));
    QUARK_ASSIGN_OR_RETURN(vocab.pre, NamePreTokenizer(tok, file, model_type));
    QUARK_ASSIGN_OR_RETURN(const ModelVocab model_vocab, ReadTokens(tok, file, vocab_size, vocab));
    QUARK_RETURN_IF_ERROR(ReadMerges(tok, file, model_vocab, vocab));
    QUARK_RETURN_IF_ERROR(bpe::ReadSpecialVocab(model_dir, tok, vocab));
    return vocab;
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(StrCat(file, ": a field of the wrong JSON type: ", e.what()));
  }
}

void AppendBpeTokenizerMetadata(const BpeVocab& vocab, Metadata& md) {
  std::vector<double> types;
  types.reserve(vocab.types.size());
  for (GgufTokenKind t : vocab.types) types.push_back(static_cast<int32_t>(t));
  md.emplace_back("tokenizer.ggml.model", Value::Str("gpt2"));
  md.emplace_back("tokenizer.ggml.pre", Value::Str(vocab.pre));
  md.emplace_back("tokenizer.ggml.tokens", Value::Strs(vocab.tokens));
  md.emplace_back("tokenizer.ggml.token_type", Value::Numbers(ValueType::kInt32, std::move(types)));
  md.emplace_back("tokenizer.ggml.merges", Value::Strs(vocab.merges));
  // gguf-py's key names (SEP_ID is spelled "seperator" there and in llama.cpp); it has no writer for a cls id, which
  // the converter skips with a warning.
  static const std::map<std::string, std::string> kIdKeys = {
      {"bos", "bos"},     {"eos", "eos"},   {"unk", "unknown"}, {"sep", "seperator"},
      {"pad", "padding"}, {"mask", "mask"}, {"eot", "eot"},     {"eom", "eom"}};
  for (const auto& [type, id] : vocab.special_ids) {
    auto key = kIdKeys.find(type);
    if (key == kIdKeys.end()) continue;
    md.emplace_back(StrCat("tokenizer.ggml.", key->second, "_token_id"), Value::U32(static_cast<uint32_t>(id)));
  }
  // gguf-py has add_{bos,eos,sep}_token writers only; the converter skips the others with a warning.
  for (const auto& [type, add] : vocab.add_special) {
    if (type == "bos" || type == "eos" || type == "sep") {
      md.emplace_back(StrCat("tokenizer.ggml.add_", type, "_token"), Value::Bool(add));
    }
  }
  if (!vocab.chat_template.empty()) md.emplace_back("tokenizer.chat_template", Value::Str(vocab.chat_template));
}

}  // namespace quark::exporter::gguf
