#include "core/runtime/tokenizer_json_decoder.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/base/strings.h"
#include "core/runtime/tokenizer_json_pipeline.h"
#include "core/runtime/tokenizer_json_text.h"

namespace quark::runtime::tokenizer_json {
namespace {

using Json = nlohmann::json;

std::string ReplaceAll(std::string_view text, const std::string& from, const std::string& to) {
  if (from.empty()) return std::string(text);
  std::string out;
  size_t last = 0;
  for (size_t at = text.find(from); at != std::string_view::npos; at = text.find(from, last)) {
    out.append(text.substr(last, at - last));
    out += to;
    last = at + from.size();
  }
  out.append(text.substr(last));
  return out;
}

class ByteLevelDecoder : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      std::string decoded;
      bytes += ByteLevelDecode(token, &decoded) ? decoded : token;  // a token outside the alphabet stays as is
    }
    return {bytes};
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) token = ReplaceAll(token, from_, to_);
    return tokens;
  }

 private:
  std::string from_, to_;
};

// Runs of <0xXX> tokens become their bytes when those form valid UTF-8, else one U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (FindInvalidUtf8(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending_count; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& token : tokens) {
      unsigned value = 0;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' &&
          std::sscanf(token.c_str() + 3, "%2x", &value) == 1) {
        pending.push_back(static_cast<char>(value));
        ++pending_count;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    return out;
  }
};

class FuseDecoder : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::string all;
    for (const std::string& token : tokens) all += token;
    return {all};
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, int start, int stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) {
      std::vector<std::string> chars = SplitCodePoints(token);
      size_t begin = 0, end = chars.size();
      for (int i = 0; i < start_ && begin < end && chars[begin] == content_; ++i) ++begin;
      for (int i = 0; i < stop_ && end > begin && chars[end - 1] == content_; ++i) --end;
      std::string kept;
      for (size_t i = begin; i < end; ++i) kept += chars[i];
      token = std::move(kept);
    }
    return tokens;
  }

 private:
  std::string content_;
  int start_, stop_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first) : replacement_(std::move(replacement)),
                                                                strip_first_(strip_first) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = ReplaceAll(tokens[i], replacement_, " ");
      if (i == 0 && strip_first_ && !tokens[i].empty() && tokens[i][0] == ' ') tokens[i].erase(0, 1);
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (const auto& step : steps_) tokens = step->DecodeChain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const Json& config, const std::string& path) {
  if (config.is_null()) return std::unique_ptr<Decoder>();
  auto type = GetType(config, path);
  if (!type.ok()) return type.status();
  if (*type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder());
  if (*type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (*type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (*type == "Replace") {
    auto content = GetString(config, "content", path);
    if (!content.ok()) return content.status();
    const Json& pattern = config.value("pattern", Json());
    if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string()) {
      return absl::UnimplementedError(StrCat(path, ".pattern: only {\"String\": ...} patterns are supported in "
                                             "a Replace decoder"));
    }
    return std::unique_ptr<Decoder>(new ReplaceDecoder(pattern["String"].get<std::string>(), *content));
  }
  if (*type == "Strip") {
    auto content = GetString(config, "content", path);
    if (!content.ok()) return content.status();
    if (!config.value("start", Json()).is_number_integer() || !config.value("stop", Json()).is_number_integer()) {
      return absl::InvalidArgumentError(StrCat(path, ".start and ", path, ".stop must be integers"));
    }
    return std::unique_ptr<Decoder>(new StripDecoder(*content, config["start"].get<int>(), config["stop"].get<int>()));
  }
  if (*type == "Metaspace") {
    auto replacement = GetString(config, "replacement", path);
    if (!replacement.ok()) return replacement.status();
    bool strip_first = config.value("prepend_scheme", Json("always")) != Json("never");
    if (!config.contains("prepend_scheme")) {
      auto add_prefix_space = GetBool(config, "add_prefix_space", true, path);
      if (!add_prefix_space.ok()) return add_prefix_space.status();
      strip_first = *add_prefix_space;
    }
    return std::unique_ptr<Decoder>(new MetaspaceDecoder(*replacement, strip_first));
  }
  if (*type == "Sequence") {
    auto it = config.find("decoders");
    if (it == config.end() || !it->is_array()) return absl::InvalidArgumentError(StrCat(path, ".decoders must be an array"));
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < it->size(); ++i) {
      auto step = MakeDecoder((*it)[i], StrCat(path, ".decoders[", i, "]"));
      if (!step.ok()) return step.status();
      if (*step != nullptr) steps.push_back(std::move(*step));
    }
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(steps)));
  }
  return absl::UnimplementedError(StrCat(path, ": decoder type \"", *type, "\" is not supported (supported: "
                                         "ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence)"));
}

void AddedTokenMatcher::Add(const std::string& content, int value) {
  if (content.empty()) return;
  auto& bucket = by_first_byte_[static_cast<unsigned char>(content[0])];
  bucket.emplace_back(content, value);
  std::stable_sort(bucket.begin(), bucket.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  ++count_;
}

std::vector<AddedTokenMatcher::Piece> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<Piece> pieces;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const auto& bucket = by_first_byte_[static_cast<unsigned char>(text[i])];
    const std::pair<std::string, int>* match = nullptr;
    for (const auto& candidate : bucket) {
      if (text.compare(i, candidate.first.size(), candidate.first) == 0) {
        match = &candidate;
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (i > start) pieces.push_back({text.substr(start, i - start), -1});
    pieces.push_back({text.substr(i, match->first.size()), match->second});
    i += match->first.size();
    start = i;
  }
  if (start < text.size()) pieces.push_back({text.substr(start), -1});
  return pieces;
}

}  // namespace quark::runtime::tokenizer_json
