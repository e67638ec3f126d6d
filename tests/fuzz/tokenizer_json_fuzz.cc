// libFuzzer target for the tokenizer.json reader and pipeline (core/runtime/tokenizer_json*.cc): a model folder
// from anywhere brings its tokenizer.json and tokenizer_config.json, and the calibration text runs through the
// normalizer, split regexes, BPE and decoder they describe.
//
// Input: tokenizer.json [ NUL text [ NUL tokenizer_config.json ] ]. Without a text part a fixed sample (ASCII,
// digits, accents, CJK, emoji, whitespace runs) is encoded. Ids must lie inside the vocabulary; Decode must not
// crash on them nor on ids outside it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/tokenizer_json.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

constexpr std::string_view kSample =
    "Hello world! It's 2024, isn't it?  Caf\xC3\xA9 na\xC3\xAFve \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80\n\ttabs  "
    "and   spaces 12345 <s></s><|endoftext|>";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t first = input.find('\0');
  const std::string_view tokenizer_json = input.substr(0, first);
  std::string_view text = kSample;
  std::string_view config_json;
  if (first != std::string_view::npos) {
    text = input.substr(first + 1);
    const size_t second = text.find('\0');
    if (second != std::string_view::npos) {
      config_json = text.substr(second + 1);
      text = text.substr(0, second);
    }
  }
  auto tokenizer = quark::runtime::JsonTokenizer::FromJson(tokenizer_json, config_json, "fuzz");
  if (!tokenizer.ok()) return 0;
  const quark::runtime::JsonTokenizer& t = **tokenizer;
  const int64_t vocab = t.vocab_size();
  Check(vocab >= 0);
  for (bool special : {false, true}) {
    auto ids = t.Encode(text, special);
    if (!ids.ok()) continue;
    for (int64_t id : *ids) Check(id >= 0 && id < vocab);
    (void)t.Decode(*ids);
  }
  (void)t.Decode({-1, 0, 1, vocab, vocab + 1, INT64_MAX, INT64_MIN});
  (void)t.TokenToId(text);
  return 0;
}
