#include "core/runtime/tokenizer_json.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/strings.h"
#include "core/runtime/tokenizer_json_bpe.h"
#include "core/runtime/tokenizer_json_decoder.h"
#include "core/runtime/tokenizer_json_pipeline.h"
#include "core/runtime/tokenizer_json_text.h"

namespace quark::runtime {
namespace {

using Json = nlohmann::json;
using tokenizer_json::GetBool;
using tokenizer_json::GetString;

absl::StatusOr<Json> ParseJson(std::string_view text, const std::string& origin) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(StrCat(origin, ": malformed JSON at byte offset ", e.byte, ": ", e.what()));
  } catch (const Json::out_of_range& e) {
    // A number no double holds ("1e400") is out_of_range, not a parse_error (found by tokenizer_json_fuzz).
    return absl::InvalidArgumentError(StrCat(origin, ": malformed JSON: ", e.what()));
  }
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("cannot read ", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A token named in tokenizer_config.json: "bos_token": "<s>" or {"content": "<s>", ...}.
std::string TokenContent(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) return value["content"];
  return "";
}

struct Template {
  std::vector<int64_t> prefix, suffix;
};

// The ids of a TemplateProcessing "SpecialToken" item.
absl::StatusOr<std::vector<int64_t>> TemplateSpecialIds(const Json& post, const std::string& name,
                                                        const std::string& path,
                                                        const std::function<int64_t(const std::string&)>& lookup) {
  const Json& specials = post.value("special_tokens", Json::object());
  if (specials.contains(name)) {
    const Json& ids = specials[name].value("ids", Json());
    if (!ids.is_array()) return absl::InvalidArgumentError(StrCat(path, ".special_tokens[\"", name, "\"].ids must be an array"));
    std::vector<int64_t> out;
    for (const Json& id : ids) {
      if (!id.is_number_integer()) return absl::InvalidArgumentError(StrCat(path, ".special_tokens[\"", name, "\"].ids must hold integers"));
      out.push_back(id.get<int64_t>());
    }
    return out;
  }
  const int64_t id = lookup(name);
  if (id < 0) return absl::InvalidArgumentError(StrCat(path, ": special token \"", name, "\" is not in the vocab"));
  return std::vector<int64_t>{id};
}

absl::StatusOr<Template> MakeTemplate(const Json& post, const std::string& path,
                                      const std::function<int64_t(const std::string&)>& lookup) {
  auto type = tokenizer_json::GetType(post, path);
  if (!type.ok()) return type.status();
  Template out;
  if (*type == "ByteLevel") return out;
  if (*type == "TemplateProcessing") {
    const Json& single = post.value("single", Json());
    if (!single.is_array()) return absl::InvalidArgumentError(StrCat(path, ".single must be an array"));
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const Json& item = single[i];
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const Json& special = item.value("SpecialToken", Json());
      if (!special.is_object() || !special.contains("id") || !special["id"].is_string()) {
        return absl::InvalidArgumentError(StrCat(path, ".single[", i, "] must be {\"Sequence\": ...} or "
                                                 "{\"SpecialToken\": {\"id\": ...}}"));
      }
      auto ids = TemplateSpecialIds(post, special["id"], StrCat(path, ".single[", i, "]"), lookup);
      if (!ids.ok()) return ids.status();
      auto& side = seen_sequence ? out.suffix : out.prefix;
      side.insert(side.end(), ids->begin(), ids->end());
    }
    return out;
  }
  if (*type == "RobertaProcessing" || *type == "BertProcessing") {
    for (const char* field : {"cls", "sep"}) {
      const Json& pair = post.value(field, Json());
      if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) {
        return absl::InvalidArgumentError(StrCat(path, ".", field, " must be [token, id]"));
      }
      (std::string(field) == "cls" ? out.prefix : out.suffix).push_back(pair[1].get<int64_t>());
    }
    return out;
  }
  if (*type == "Sequence") {
    const Json& processors = post.value("processors", Json());
    if (!processors.is_array()) return absl::InvalidArgumentError(StrCat(path, ".processors must be an array"));
    for (size_t i = 0; i < processors.size(); ++i) {
      auto inner = MakeTemplate(processors[i], StrCat(path, ".processors[", i, "]"), lookup);
      if (!inner.ok()) return inner.status();
      out.prefix.insert(out.prefix.begin(), inner->prefix.begin(), inner->prefix.end());
      out.suffix.insert(out.suffix.end(), inner->suffix.begin(), inner->suffix.end());
    }
    return out;
  }
  return absl::UnimplementedError(StrCat(path, ": post-processor type \"", *type, "\" is not supported (supported: "
                                         "TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence)"));
}

}  // namespace

struct JsonTokenizer::AddedToken {
  std::string content;
  int64_t id = -1;
  bool lstrip = false, rstrip = false, normalized = false, special = false;
};

JsonTokenizer::JsonTokenizer() = default;
JsonTokenizer::~JsonTokenizer() = default;

absl::StatusOr<std::unique_ptr<JsonTokenizer>> JsonTokenizer::Open(const std::string& path) {
  std::filesystem::path file(path);
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) file /= "tokenizer.json";
  auto text = ReadFile(file);
  if (!text.ok()) return absl::NotFoundError(StrCat("no tokenizer.json at ", file.string()));
  const std::filesystem::path config_file = file.parent_path() / "tokenizer_config.json";
  std::string config_text;
  if (std::filesystem::exists(config_file, ec)) {
    auto config = ReadFile(config_file);
    if (!config.ok()) return config.status();
    config_text = std::move(*config);
  }
  auto tokenizer = FromJson(*text, config_text, file.string());
  if (!tokenizer.ok()) return tokenizer.status();
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<JsonTokenizer>> JsonTokenizer::FromJson(std::string_view tokenizer_json,
                                                                        std::string_view config_json,
                                                                        const std::string& origin) {
  auto root = ParseJson(tokenizer_json, origin);
  if (!root.ok()) return root.status();
  if (!root->is_object()) return absl::InvalidArgumentError(StrCat(origin, ": the top level must be an object"));
  auto with_origin = [&](const absl::Status& s) {
    return absl::Status(s.code(), StrCat(origin, ": ", std::string(s.message())));
  };
  std::unique_ptr<JsonTokenizer> t(new JsonTokenizer());
  auto model = tokenizer_json::BpeModel::FromJson(root->value("model", Json()), "model");
  if (!model.ok()) return with_origin(model.status());
  t->model_ = std::move(*model);
  auto normalizer = tokenizer_json::MakeNormalizer(root->value("normalizer", Json()), "normalizer");
  if (!normalizer.ok()) return with_origin(normalizer.status());
  t->normalizer_ = std::move(*normalizer);
  auto pre_tokenizer = tokenizer_json::MakePreTokenizer(root->value("pre_tokenizer", Json()), "pre_tokenizer");
  if (!pre_tokenizer.ok()) return with_origin(pre_tokenizer.status());
  t->pre_tokenizer_ = std::move(*pre_tokenizer);
  auto decoder = tokenizer_json::MakeDecoder(root->value("decoder", Json()), "decoder");
  if (!decoder.ok()) return with_origin(decoder.status());
  t->decoder_ = std::move(*decoder);

  const Json& added = root->value("added_tokens", Json::array());
  if (!added.is_array()) return with_origin(absl::InvalidArgumentError("added_tokens must be an array"));
  t->raw_matcher_ = std::make_unique<tokenizer_json::AddedTokenMatcher>();
  t->normalized_matcher_ = std::make_unique<tokenizer_json::AddedTokenMatcher>();
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string path = StrCat("added_tokens[", i, "]");
    const Json& entry = added[i];
    if (!entry.is_object()) return with_origin(absl::InvalidArgumentError(StrCat(path, " must be an object")));
    AddedToken token;
    auto content = GetString(entry, "content", path);
    if (!content.ok()) return with_origin(content.status());
    token.content = *content;
    if (!entry.value("id", Json()).is_number_integer() || entry["id"].get<int64_t>() < 0) {
      return with_origin(absl::InvalidArgumentError(StrCat(path, ".id must be an integer >= 0")));
    }
    token.id = entry["id"].get<int64_t>();
    auto special = GetBool(entry, "special", false, path);
    auto lstrip = GetBool(entry, "lstrip", false, path);
    auto rstrip = GetBool(entry, "rstrip", false, path);
    if (!special.ok() || !lstrip.ok() || !rstrip.ok()) {
      return with_origin(!special.ok() ? special.status() : !lstrip.ok() ? lstrip.status() : rstrip.status());
    }
    auto normalized = GetBool(entry, "normalized", !*special, path);
    if (!normalized.ok()) return with_origin(normalized.status());
    token.special = *special, token.lstrip = *lstrip, token.rstrip = *rstrip, token.normalized = *normalized;
    const int index = static_cast<int>(t->added_.size());
    if (token.normalized && t->normalizer_ != nullptr) {
      auto normalized_content = t->normalizer_->Normalize(token.content);
      if (!normalized_content.ok()) return with_origin(normalized_content.status());
      t->normalized_matcher_->Add(*normalized_content, index);
    } else {
      t->raw_matcher_->Add(token.content, index);
    }
    t->added_.push_back(std::move(token));
  }

  const Json& post = root->value("post_processor", Json());
  if (!post.is_null()) {
    auto lookup = [&t](const std::string& name) { return t->TokenToId(name); };
    auto tmpl = MakeTemplate(post, "post_processor", lookup);
    if (!tmpl.ok()) return with_origin(tmpl.status());
    // Encode promises ids in [0, vocab_size()), which callers check against the model's embedding rows; a
    // template id the file invents (found by tokenizer_json_fuzz) would break that promise.
    for (const std::vector<int64_t>* side : {&tmpl->prefix, &tmpl->suffix}) {
      for (int64_t id : *side) {
        if (id < 0 || id >= t->vocab_size()) {
          return with_origin(absl::InvalidArgumentError(StrCat("post_processor: special token id ", id,
                                                               " is outside the vocabulary (", t->vocab_size(), " ids)")));
        }
      }
    }
    t->template_prefix_ = std::move(tmpl->prefix);
    t->template_suffix_ = std::move(tmpl->suffix);
    t->has_post_processor_ = true;
  }
  if (!config_json.empty()) {
    if (auto status = t->ReadConfig(config_json, origin); !status.ok()) return status;
  }
  return t;
}

absl::Status JsonTokenizer::ReadConfig(std::string_view config_json, const std::string& origin) {
  const std::string where =
      (std::filesystem::path(origin).parent_path() / "tokenizer_config.json").string();
  auto config = ParseJson(config_json, where);
  if (!config.ok()) return config.status();
  if (!config->is_object()) return absl::InvalidArgumentError(StrCat(where, ": the top level must be an object"));
  const std::string bos = TokenContent(config->value("bos_token", Json()));
  const std::string eos = TokenContent(config->value("eos_token", Json()));
  if (!bos.empty()) bos_id_ = TokenToId(bos);
  if (!eos.empty()) eos_id_ = TokenToId(eos);
  auto add_bos = GetBool(*config, "add_bos_token", false, where);
  if (!add_bos.ok()) return add_bos.status();
  add_bos_token_ = *add_bos;
  const Json& chat = config->value("chat_template", Json());
  if (chat.is_string()) {
    chat_template_ = chat.get<std::string>();
  } else if (chat.is_array()) {
    for (const Json& named : chat) {
      if (named.is_object() && named.value("name", Json()) == Json("default") && named.value("template", Json()).is_string()) {
        chat_template_ = named["template"];
      }
    }
  }
  return absl::OkStatus();
}

int64_t JsonTokenizer::TokenToId(std::string_view token) const {
  for (const AddedToken& added : added_) {
    if (added.content == token) return added.id;
  }
  return model_->TokenToId(token);
}

int64_t JsonTokenizer::vocab_size() const {
  int64_t size = model_->size();
  for (const AddedToken& added : added_) size = std::max(size, added.id + 1);
  return size;
}

absl::Status JsonTokenizer::EncodeSection(std::string_view text, bool first_section, std::vector<int64_t>* ids) const {
  std::string normalized(text);
  if (normalizer_ != nullptr) {
    auto result = normalizer_->Normalize(std::move(normalized));
    if (!result.ok()) return result.status();
    normalized = std::move(*result);
  }
  auto pieces = normalized_matcher_->Split(normalized);
  for (size_t j = 0; j < pieces.size(); ++j) {
    if (pieces[j].value >= 0) {
      const AddedToken& token = added_[pieces[j].value];
      if (token.lstrip && j > 0) pieces[j - 1].text = tokenizer_json::TrimWhitespaceRight(pieces[j - 1].text);
      if (token.rstrip && j + 1 < pieces.size()) pieces[j + 1].text = tokenizer_json::TrimWhitespaceLeft(pieces[j + 1].text);
    }
  }
  for (const auto& piece : pieces) {
    if (piece.value >= 0) {
      ids->push_back(added_[piece.value].id);
      continue;
    }
    if (piece.text.empty()) continue;
    std::vector<std::string> words{std::string(piece.text)};
    if (pre_tokenizer_ != nullptr) words = pre_tokenizer_->Split(std::move(words), first_section);
    for (const std::string& word : words) model_->Tokenize(word, ids);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> JsonTokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  if (const size_t bad = tokenizer_json::FindInvalidUtf8(text); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(StrCat("text is not valid UTF-8 at byte offset ", bad));
  }
  std::vector<int64_t> ids;
  if (add_special_tokens) {
    ids = template_prefix_;
    if (!has_post_processor_ && add_bos_token_ && bos_id_ >= 0) ids.push_back(bos_id_);
  }
  // Added tokens are split out of the raw text first; lstrip/rstrip eat the whitespace beside them.
  auto sections = raw_matcher_->Split(text);
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].value < 0) continue;
    const AddedToken& token = added_[sections[i].value];
    if (token.lstrip && i > 0) sections[i - 1].text = tokenizer_json::TrimWhitespaceRight(sections[i - 1].text);
    if (token.rstrip && i + 1 < sections.size()) {
      sections[i + 1].text = tokenizer_json::TrimWhitespaceLeft(sections[i + 1].text);
    }
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].value >= 0) {
      ids.push_back(added_[sections[i].value].id);
    } else if (!sections[i].text.empty()) {
      if (auto status = EncodeSection(sections[i].text, i == 0, &ids); !status.ok()) return status;
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), template_suffix_.begin(), template_suffix_.end());
  return ids;
}

std::string JsonTokenizer::Decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    const AddedToken* added = nullptr;
    for (const AddedToken& candidate : added_) {
      if (candidate.id == id) added = &candidate;
    }
    if (added != nullptr) {
      if (!added->special) tokens.push_back(added->content);
      continue;
    }
    const std::string& token = model_->IdToToken(id);
    if (!token.empty()) tokens.push_back(token);
  }
  if (decoder_ != nullptr) tokens = decoder_->DecodeChain(std::move(tokens));
  std::string text;
  for (const std::string& piece : tokens) text += piece;
  return text;
}

}  // namespace quark::runtime
