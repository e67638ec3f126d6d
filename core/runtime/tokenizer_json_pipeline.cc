#include "core/runtime/tokenizer_json_pipeline.h"

#include <algorithm>
#include <utility>

#include "core/base/strings.h"
#include "core/runtime/tokenizer_json_text.h"

namespace quark::runtime::tokenizer_json {
namespace {

using Json = nlohmann::json;

// ---- normalizers ----

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  absl::StatusOr<std::string> Normalize(std::string text) const override { return UnicodeNormalize(text, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  absl::StatusOr<std::string> Normalize(std::string text) const override { return UnicodeLowercase(text); }
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  // Hugging Face prepends only to non-empty text.
  absl::StatusOr<std::string> Normalize(std::string text) const override {
    return text.empty() ? text : prefix_ + text;
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  absl::StatusOr<std::string> Normalize(std::string text) const override {
    std::string out;
    size_t last = 0;
    for (const auto& [begin, end] : pattern_->FindAll(text)) {
      out.append(text, last, begin - last);
      out += content_;
      last = end;
    }
    out.append(text, last, std::string::npos);
    return out;
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  absl::StatusOr<std::string> Normalize(std::string text) const override {
    std::string_view view = text;
    if (left_) view = TrimWhitespaceLeft(view);
    if (right_) view = TrimWhitespaceRight(view);
    return std::string(view);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  absl::StatusOr<std::string> Normalize(std::string text) const override {
    for (const auto& step : steps_) {
      auto next = step->Normalize(std::move(text));
      if (!next.ok()) return next.status();
      text = std::move(*next);
    }
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// ---- splitting with Hugging Face's SplitDelimiterBehavior ----

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Segment {
  size_t begin, end;
  bool is_match;
};

// The pieces of `text` around `matches`, merged as `behavior` says (tokenizers' NormalizedString::split).
std::vector<std::string> SplitText(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches,
                                   Behavior behavior, bool invert) {
  std::vector<Segment> segments;
  size_t last = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > last) segments.push_back({last, begin, invert});
    segments.push_back({begin, end, !invert});
    last = end;
  }
  if (last < text.size()) segments.push_back({last, text.size(), invert});

  std::vector<std::pair<size_t, size_t>> spans;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Segment& s : segments) {
        if (!s.is_match) spans.emplace_back(s.begin, s.end);
      }
      break;
    case Behavior::kIsolated:
      for (const Segment& s : segments) spans.emplace_back(s.begin, s.end);
      break;
    case Behavior::kMergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !spans.empty()) {
          spans.back().second = s.end;
        } else {
          spans.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->is_match && !previous_match && !spans.empty()) {
          spans.back().first = it->begin;
        } else {
          spans.emplace_back(it->begin, it->end);
        }
        previous_match = it->is_match;
      }
      std::reverse(spans.begin(), spans.end());
      break;
    case Behavior::kContiguous:
      for (const Segment& s : segments) {
        if (s.is_match == previous_match && !spans.empty()) {
          spans.back().second = s.end;
        } else {
          spans.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
  }
  std::vector<std::string> out;
  out.reserve(spans.size());
  for (const auto& [begin, end] : spans) out.emplace_back(text.substr(begin, end - begin));
  return out;
}

// ---- pre-tokenizers ----

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  std::vector<std::string> Split(std::vector<std::string> pieces, bool) const override {
    std::vector<std::string> out;
    for (const std::string& piece : pieces) {
      for (std::string& part : SplitText(piece, pattern_->FindAll(piece), behavior_, invert_)) {
        out.push_back(std::move(part));
      }
    }
    return out;
  }

 private:
  std::unique_ptr<Regex> pattern_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> split)
      : add_prefix_space_(add_prefix_space), split_(std::move(split)) {}
  std::vector<std::string> Split(std::vector<std::string> pieces, bool) const override {
    std::vector<std::string> out;
    for (std::string& piece : pieces) {
      if (add_prefix_space_ && (piece.empty() || piece[0] != ' ')) piece.insert(0, " ");
      if (split_ == nullptr) {
        out.push_back(ByteLevelEncode(piece));
        continue;
      }
      for (const auto& [begin, end] : split_->FindAll(piece)) {
        out.push_back(ByteLevelEncode(std::string_view(piece).substr(begin, end - begin)));
      }
    }
    return out;
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> split_;  // nullptr when use_regex is false
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split, std::unique_ptr<Regex> literal)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split), literal_(std::move(literal)) {}
  std::vector<std::string> Split(std::vector<std::string> pieces, bool first_section) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string text;
      for (char c : pieces[i]) {
        if (c == ' ') {
          text += replacement_;
        } else {
          text.push_back(c);
        }
      }
      const bool first = first_section && i == 0;
      const bool prepend = scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && first);
      if (prepend && text.compare(0, replacement_.size(), replacement_) != 0) text.insert(0, replacement_);
      if (!split_) {
        out.push_back(std::move(text));
        continue;
      }
      for (std::string& part : SplitText(text, literal_->FindAll(text), Behavior::kMergedWithNext, false)) {
        out.push_back(std::move(part));
      }
    }
    return out;
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  std::unique_ptr<Regex> literal_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  std::vector<std::string> Split(std::vector<std::string> pieces, bool first_section) const override {
    for (const auto& step : steps_) pieces = step->Split(std::move(pieces), first_section);
    return pieces;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// ---- construction ----

absl::StatusOr<std::unique_ptr<Regex>> PatternOf(const Json& config, const std::string& path) {
  auto it = config.find("pattern");
  if (it == config.end() || !it->is_object()) {
    return absl::InvalidArgumentError(StrCat(path, ".pattern must be {\"String\": ...} or {\"Regex\": ...}"));
  }
  if (it->contains("String") && (*it)["String"].is_string()) {
    return Regex::Literal((*it)["String"].get<std::string>(), path + ".pattern.String");
  }
  if (it->contains("Regex") && (*it)["Regex"].is_string()) {
    return Regex::Compile((*it)["Regex"].get<std::string>(), path + ".pattern.Regex");
  }
  return absl::InvalidArgumentError(StrCat(path, ".pattern must hold a string \"String\" or \"Regex\""));
}

absl::StatusOr<Behavior> BehaviorOf(const Json& config, const std::string& path) {
  auto name = GetString(config, "behavior", path);
  if (!name.ok()) return name.status();
  if (*name == "Removed") return Behavior::kRemoved;
  if (*name == "Isolated") return Behavior::kIsolated;
  if (*name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (*name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (*name == "Contiguous") return Behavior::kContiguous;
  return absl::InvalidArgumentError(StrCat(path, ".behavior: unknown split behavior \"", *name, "\""));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeRegexSplit(const std::string& pattern, Behavior behavior,
                                                             bool invert, const std::string& path) {
  auto regex = Regex::Compile(pattern, path);
  if (!regex.ok()) return regex.status();
  return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(*regex), behavior, invert));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeMetaspace(const Json& config, const std::string& path) {
  auto replacement = GetString(config, "replacement", path);
  if (!replacement.ok()) return replacement.status();
  if (SplitCodePoints(*replacement).size() != 1) {
    return absl::InvalidArgumentError(StrCat(path, ".replacement must be one character, got \"", *replacement, "\""));
  }
  PrependScheme scheme = PrependScheme::kAlways;
  if (config.contains("prepend_scheme")) {
    auto name = GetString(config, "prepend_scheme", path);
    if (!name.ok()) return name.status();
    if (*name == "always") {
      scheme = PrependScheme::kAlways;
    } else if (*name == "first") {
      scheme = PrependScheme::kFirst;
    } else if (*name == "never") {
      scheme = PrependScheme::kNever;
    } else {
      return absl::InvalidArgumentError(StrCat(path, ".prepend_scheme: unknown value \"", *name, "\""));
    }
  } else {
    auto add_prefix_space = GetBool(config, "add_prefix_space", true, path);
    if (!add_prefix_space.ok()) return add_prefix_space.status();
    scheme = *add_prefix_space ? PrependScheme::kAlways : PrependScheme::kNever;
  }
  auto split = GetBool(config, "split", true, path);
  if (!split.ok()) return split.status();
  auto literal = Regex::Literal(*replacement, path + ".replacement");
  if (!literal.ok()) return literal.status();
  return std::unique_ptr<PreTokenizer>(new MetaspacePreTokenizer(*replacement, scheme, *split, std::move(*literal)));
}

template <typename Step, typename Make>
absl::StatusOr<std::vector<std::unique_ptr<Step>>> MakeSteps(const Json& config, const char* field,
                                                             const std::string& path, Make make) {
  auto it = config.find(field);
  if (it == config.end() || !it->is_array()) {
    return absl::InvalidArgumentError(StrCat(path, ".", field, " must be an array"));
  }
  std::vector<std::unique_ptr<Step>> steps;
  for (size_t i = 0; i < it->size(); ++i) {
    auto step = make((*it)[i], StrCat(path, ".", field, "[", i, "]"));
    if (!step.ok()) return step.status();
    if (*step != nullptr) steps.push_back(std::move(*step));
  }
  return steps;
}

}  // namespace

absl::StatusOr<std::string> GetString(const Json& object, const char* field, const std::string& path) {
  auto it = object.find(field);
  if (it == object.end() || !it->is_string()) {
    return absl::InvalidArgumentError(StrCat(path, ".", field, " must be a string"));
  }
  return it->get<std::string>();
}

absl::StatusOr<bool> GetBool(const Json& object, const char* field, bool fallback, const std::string& path) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return absl::InvalidArgumentError(StrCat(path, ".", field, " must be true or false"));
  return it->get<bool>();
}

absl::StatusOr<std::string> GetType(const Json& object, const std::string& path) {
  if (!object.is_object()) return absl::InvalidArgumentError(StrCat(path, " must be an object or null"));
  return GetString(object, "type", path);
}

absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const Json& config, const std::string& path) {
  if (config.is_null()) return std::unique_ptr<Normalizer>();
  auto type = GetType(config, path);
  if (!type.ok()) return type.status();
  if (*type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalForm::kNfc));
  if (*type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalForm::kNfd));
  if (*type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalForm::kNfkc));
  if (*type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalForm::kNfkd));
  if (*type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (*type == "Prepend") {
    auto prefix = GetString(config, "prepend", path);
    if (!prefix.ok()) return prefix.status();
    return std::unique_ptr<Normalizer>(new PrependNormalizer(*prefix));
  }
  if (*type == "Replace") {
    auto pattern = PatternOf(config, path);
    if (!pattern.ok()) return pattern.status();
    auto content = GetString(config, "content", path);
    if (!content.ok()) return content.status();
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(*pattern), *content));
  }
  if (*type == "Strip") {
    auto left = GetBool(config, "strip_left", true, path);
    auto right = GetBool(config, "strip_right", true, path);
    if (!left.ok()) return left.status();
    if (!right.ok()) return right.status();
    return std::unique_ptr<Normalizer>(new StripNormalizer(*left, *right));
  }
  if (*type == "Sequence") {
    auto steps = MakeSteps<Normalizer>(config, "normalizers", path, MakeNormalizer);
    if (!steps.ok()) return steps.status();
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(*steps)));
  }
  return absl::UnimplementedError(StrCat(path, ": normalizer type \"", *type, "\" is not supported (supported: NFC, "
                                         "NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, Sequence)"));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const Json& config, const std::string& path) {
  if (config.is_null()) return std::unique_ptr<PreTokenizer>();
  auto type = GetType(config, path);
  if (!type.ok()) return type.status();
  if (*type == "ByteLevel") {
    auto add_prefix_space = GetBool(config, "add_prefix_space", true, path);
    auto use_regex = GetBool(config, "use_regex", true, path);
    if (!add_prefix_space.ok()) return add_prefix_space.status();
    if (!use_regex.ok()) return use_regex.status();
    std::unique_ptr<Regex> split;
    if (*use_regex) {
      auto regex = Regex::Compile(std::string(kGpt2SplitPattern), path);
      if (!regex.ok()) return regex.status();
      split = std::move(*regex);
    }
    return std::unique_ptr<PreTokenizer>(new ByteLevelPreTokenizer(*add_prefix_space, std::move(split)));
  }
  if (*type == "Split") {
    auto pattern = PatternOf(config, path);
    if (!pattern.ok()) return pattern.status();
    auto behavior = BehaviorOf(config, path);
    if (!behavior.ok()) return behavior.status();
    auto invert = GetBool(config, "invert", false, path);
    if (!invert.ok()) return invert.status();
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(*pattern), *behavior, *invert));
  }
  if (*type == "Metaspace") return MakeMetaspace(config, path);
  if (*type == "Digits") {
    auto individual = GetBool(config, "individual_digits", false, path);
    if (!individual.ok()) return individual.status();
    return MakeRegexSplit(*individual ? R"(\p{N})" : R"(\p{N}+)", Behavior::kIsolated, false, path);
  }
  if (*type == "Whitespace") return MakeRegexSplit(R"(\w+|[^\w\s]+)", Behavior::kRemoved, true, path);
  if (*type == "WhitespaceSplit") return MakeRegexSplit(R"(\s+)", Behavior::kRemoved, false, path);
  if (*type == "Sequence") {
    auto steps = MakeSteps<PreTokenizer>(config, "pretokenizers", path, MakePreTokenizer);
    if (!steps.ok()) return steps.status();
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(*steps)));
  }
  return absl::UnimplementedError(StrCat(path, ": pre-tokenizer type \"", *type, "\" is not supported (supported: "
                                         "ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, "
                                         "Sequence)"));
}

}  // namespace quark::runtime::tokenizer_json
