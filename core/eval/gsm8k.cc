#include "core/eval/gsm8k.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <regex>

namespace quark::eval {
namespace {

constexpr char kInvalid[] = "[invalid]";

// Python's str.strip(): whitespace by str.isspace (ASCII \t\n\v\f\r, space, \x1c-\x1f; numbers never hold the others).
std::string PythonStrip(const std::string& s) {
  const auto space = [](unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); };
  size_t begin = 0, end = s.size();
  while (begin < end && space(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && space(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

// re.findall(pattern, text)[group_select] with RegexFilter's handling of groups (the first non-empty one).
std::string FindAllSelect(const std::regex& pattern, const std::string& text, bool last) {
  std::vector<std::smatch> matches;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator(); ++it) {
    matches.push_back(*it);
  }
  if (matches.empty()) return kInvalid;
  const std::smatch& m = last ? matches.back() : matches.front();
  for (size_t g = 1; g < m.size(); ++g) {
    if (m[g].matched && m[g].length() > 0) return PythonStrip(m[g].str());
  }
  return kInvalid;
}

std::string RemoveAll(std::string s, char c) {
  s.erase(std::remove(s.begin(), s.end(), c), s.end());
  return s;
}

}  // namespace

const std::vector<std::string>& Gsm8kStopSequences() {
  static const std::vector<std::string> until = {"Question:", "</s>", "<|im_end|>"};
  return until;
}

std::string Gsm8kStrictMatch(const std::string& generation) {
  // "#### (\-?[0-9\.\,]+)" with its escapes written out for ECMAScript.
  static const std::regex pattern("#### (-?[0-9.,]+)");
  return FindAllSelect(pattern, generation, /*last=*/false);
}

std::string Gsm8kFlexibleExtract(const std::string& generation) {
  static const std::regex pattern("(-?[$0-9.,]{2,})|(-?[0-9]+)");
  return FindAllSelect(pattern, generation, /*last=*/true);
}

std::string Gsm8kNormalize(const std::string& text) {
  std::string s = RemoveAll(RemoveAll(text, ','), '$');
  // "(?s).*#### ": greedy across lines, so everything up to the last "#### " goes.
  const size_t marker = s.rfind("#### ");
  if (marker != std::string::npos) s.erase(0, marker + 5);
  // "\.$": a final "." or one before a final "\n" (Python's `$`).
  if (!s.empty() && s.back() == '.') {
    s.pop_back();
  } else if (s.size() >= 2 && s[s.size() - 1] == '\n' && s[s.size() - 2] == '.') {
    s.erase(s.size() - 2, 1);
  }
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Gsm8kExactMatch(const std::string& prediction, const std::string& reference) {
  return Gsm8kNormalize(prediction) == Gsm8kNormalize(reference);
}

}  // namespace quark::eval
