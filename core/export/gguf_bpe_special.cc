// gguf-py's SpecialVocab (gguf/vocab.py: _try_load_from_tokenizer_json, _try_load_from_config_json) for a
// tokenizer.json folder, step for step, so the special ids and add_*_token flags are the ones the converter writes.
// Python's truthiness is kept: a missing, null, empty-string or empty-object entry counts as unset, and a token named
// by an object in tokenizer_config.json compares unequal to the same token named by a string (as in gguf-py).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/export/gguf_bpe_json.h"

namespace quark::exporter::gguf::bpe {
namespace {

namespace fs = std::filesystem;

bool Truthy(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_string()) return !v.get<std::string>().empty();
  if (v.is_object() || v.is_array()) return !v.empty();
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  return true;
}

Json Get(const Json& object, const std::string& key) {
  return object.is_object() && object.contains(key) ? object[key] : Json();
}

// RobertaProcessing's `cls` / `sep` ([token, id]): the token, else `fallback`.
Json FirstOr(const Json& pair, const Json& fallback) { return pair.is_array() && !pair.empty() ? pair[0] : fallback; }

// `item`.get(kind, {}).get("id") of a template entry.
Json EntryId(const Json& item, const char* kind) { return Get(Get(item, kind), "id"); }

template <typename T>
void SetOrdered(std::vector<std::pair<std::string, T>>& entries, const std::string& key, T value) {
  for (auto& entry : entries) {
    if (entry.first == key) {
      entry.second = value;
      return;
    }
  }
  entries.emplace_back(key, value);
}

absl::StatusOr<std::string> ReadText(const fs::path& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  if (ec || bytes > static_cast<uintmax_t>(kMaxTokenizerFileBytes)) {
    return absl::InvalidArgumentError(StrCat(path.string(), ": cannot be read or is over ", kMaxTokenizerFileBytes,
                                             " bytes"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class SpecialVocabReader {
 public:
  SpecialVocabReader(const Json& tokenizer, Json config, bool has_config, BpeVocab& vocab)
      : tokenizer_(tokenizer), tc_(std::move(config)), has_tc_(has_config && Truthy(tc_)), vocab_(vocab) {}

  void FromPostProcessor() {
    special_bos_ = Get(tc_, "bos_token");
    special_cls_ = Get(tc_, "cls_token");
    special_eos_ = Get(tc_, "eos_token");
    special_sep_ = Get(tc_, "sep_token");
    if (!Truthy(special_bos_) && Truthy(special_cls_) && has_tc_) tc_["bos_token"] = special_bos_ = special_cls_;
    if (!Truthy(special_eos_) && Truthy(special_sep_) && has_tc_) tc_["eos_token"] = special_eos_ = special_sep_;
    const Json post = Get(tokenizer_, "post_processor");
    if (!Truthy(post)) return;
    const Json processors = post.contains("processors") ? post["processors"] : Json::array({post});
    if (!processors.is_array()) return;
    for (const Json& processor : processors) {
      const Json type = Get(processor, "type");
      if (type == "RobertaProcessing") {
        SetOrdered(vocab_.add_special, "bos", true);
        SetOrdered(vocab_.add_special, "eos", true);
        SetOrdered(vocab_.add_special, "sep", true);
        if (!Truthy(special_cls_) && has_tc_) {
          special_cls_ = FirstOr(Get(processor, "cls"), special_bos_);
          tc_["cls_token"] = special_cls_;
        }
        if (!Truthy(special_sep_) && has_tc_) {
          special_sep_ = FirstOr(Get(processor, "sep"), special_eos_);
          tc_["sep_token"] = special_sep_;
        }
      } else if (type == "TemplateProcessing") {
        FromTemplate(processor);
      }
    }
  }

  // tokenizer_config.json's add_<type>_token and <type>_token, then config.json's <type>_token_id.
  absl::Status FromConfigs(const Json& model_config, const std::string& config_file) {
    const Json added = Get(tokenizer_, "added_tokens");
    if (has_tc_) {
      for (const std::string& type : types_) {
        const Json add = Get(tc_, "add_" + type + "_token");
        if (add.is_boolean()) SetOrdered(vocab_.add_special, type, add.get<bool>());
        const Json entry = Get(tc_, type + "_token");
        std::string content;
        if (entry.is_string()) {
          content = entry.get<std::string>();
        } else if (entry.is_object() && Get(entry, "content").is_string()) {
          content = entry["content"].get<std::string>();
        } else {
          continue;
        }
        Json id;  // the first added token with that content
        if (added.is_array()) {
          for (const Json& a : added) {
            if (Get(a, "content") == content) {
              id = Get(a, "id");
              break;
            }
          }
        }
        QUARK_RETURN_IF_ERROR(SetSpecial(type, id, StrCat("tokenizer_config.json: ", type, "_token")));
      }
    }
    for (const std::string& type : types_) {
      Json id = Get(model_config, type + "_token_id");
      if (id.is_null()) id = Get(Get(model_config, "text_config"), type + "_token_id");
      QUARK_RETURN_IF_ERROR(SetSpecial(type, id, StrCat(config_file, ": ", type, "_token_id")));
    }
    return absl::OkStatus();
  }

  const Json& tokenizer_config() const { return tc_; }
  bool has_tokenizer_config() const { return has_tc_; }

 private:
  // The "crude parsing of TemplateProcessing" of gguf-py: a leading special token is the BOS (added), a trailing one
  // the EOS (the former EOS becomes EOT, or EOM), and the pair template tells whether a separator is added.
  void FromTemplate(const Json& processor) {
    const Json single = processor.contains("single") ? processor["single"] : Json::array();
    Json pair = processor.contains("pair") ? processor["pair"] : Json::array();
    Json first, last;
    if (single.is_array() && single.size() > 1) {
      first = EntryId(single.front(), "SpecialToken");
      if (Truthy(first)) {
        if (!has_tc_) {
          special_bos_ = first;
        } else if (first != special_bos_ && first != special_cls_) {
          if (!Truthy(special_bos_)) tc_["bos_token"] = special_bos_ = first;
          if (!Truthy(special_cls_)) tc_["cls_token"] = special_cls_ = first;
        }
        SetOrdered(vocab_.add_special, "bos", first == special_bos_ || first == special_cls_);
      }
      last = EntryId(single.back(), "SpecialToken");
      if (Truthy(last)) {
        if (!has_tc_) {
          special_eos_ = last;
        } else if (last != special_eos_) {
          for (const char* demoted : {"eot", "eom"}) {
            if (std::find(types_.begin(), types_.end(), demoted) == types_.end()) {
              types_.push_back(demoted);
              tc_[std::string(demoted) + "_token"] = special_eos_;
              break;
            }
          }
          tc_["eos_token"] = special_eos_ = last;
        }
        SetOrdered(vocab_.add_special, "eos", last == special_eos_);
      }
    }
    if (!pair.is_array() || pair.empty()) return;
    const size_t start = Truthy(first) && EntryId(pair.front(), "SpecialToken") == first ? 1 : 0;
    const size_t stop = Truthy(last) && EntryId(pair.back(), "SpecialToken") == last ? pair.size() - 1 : pair.size();
    if (start >= stop) return;
    const Json a = EntryId(pair[start], "Sequence"), b = EntryId(pair[stop - 1], "Sequence");
    if (a != "A" || b != "B" || stop - start <= 2) return;
    bool add_sep = false;
    const Json entry = EntryId(pair[start + 1], "SpecialToken");
    if (Truthy(entry) && (entry == special_sep_ || entry == special_eos_) && !Truthy(last)) add_sep = true;
    if (stop - start - 2 == 2) {
      const Json second = EntryId(pair[start + 2], "SpecialToken");
      if (Truthy(second) && (second == special_sep_ || second == special_eos_)) add_sep = true;
    }
    SetOrdered(vocab_.add_special, "sep", add_sep);
    if (add_sep && !Truthy(special_sep_) && has_tc_) tc_["sep_token"] = special_eos_;
  }

  // _set_special_token: ints only (the first setting wins), a negative one refused as gguf-py raises.
  absl::Status SetSpecial(const std::string& type, const Json& id, const std::string& field) {
    if (!id.is_number_integer()) return absl::OkStatus();
    const int64_t v = id.get<int64_t>();
    if (v < 0) return absl::InvalidArgumentError(StrCat(field, ": negative special token id ", v));
    for (const auto& entry : vocab_.special_ids) {
      if (entry.first == type) return absl::OkStatus();
    }
    if (v >= static_cast<int64_t>(vocab_.tokens.size())) {
      return absl::InvalidArgumentError(StrCat(field, ": special token id ", v, " is outside the vocabulary of ",
                                               vocab_.tokens.size()));
    }
    vocab_.special_ids.emplace_back(type, v);
    return absl::OkStatus();
  }

  const Json& tokenizer_;
  Json tc_;
  bool has_tc_;
  BpeVocab& vocab_;
  std::vector<std::string> types_ = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  Json special_bos_, special_cls_, special_eos_, special_sep_;
};

// tokenizer_config.json's chat_template, else chat_template.jinja, else chat_template.json's. A list of named
// templates gives its "default" one (the converter writes the others under tokenizer.chat_template.<name>, which
// this writer leaves out).
absl::StatusOr<std::string> ChatTemplate(const fs::path& dir, const Json& tc) {
  Json t = Get(tc, "chat_template");
  if (t.is_null()) {
    std::error_code ec;
    if (fs::is_regular_file(dir / "chat_template.jinja", ec)) return ReadText(dir / "chat_template.jinja");
    if (fs::is_regular_file(dir / "chat_template.json", ec)) {
      QUARK_ASSIGN_OR_RETURN(const Json j, ReadJsonFile((dir / "chat_template.json").string()));
      t = Get(j, "chat_template");
    }
  }
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const Json& named : t) {
      if (Get(named, "name") == "default" && Get(named, "template").is_string()) {
        return named["template"].get<std::string>();
      }
    }
  }
  return std::string();
}

}  // namespace

absl::Status ReadSpecialVocab(const std::string& model_dir, const Json& tokenizer, BpeVocab& vocab) {
  const fs::path dir(model_dir);
  std::error_code ec;
  Json tc;
  const bool has_tc = fs::is_regular_file(dir / "tokenizer_config.json", ec);
  if (has_tc) {
    QUARK_ASSIGN_OR_RETURN(tc, ReadJsonFile((dir / "tokenizer_config.json").string()));
  }
  SpecialVocabReader reader(tokenizer, tc, has_tc, vocab);
  reader.FromPostProcessor();
  Json model_config;
  const std::string config_file = (dir / "config.json").string();
  if (fs::is_regular_file(config_file, ec)) {
    QUARK_ASSIGN_OR_RETURN(model_config, ReadJsonFile(config_file));
  }
  if (reader.has_tokenizer_config()) {
    QUARK_ASSIGN_OR_RETURN(vocab.chat_template, ChatTemplate(dir, reader.tokenizer_config()));
  }
  return reader.FromConfigs(model_config, config_file);
}

}  // namespace quark::exporter::gguf::bpe
