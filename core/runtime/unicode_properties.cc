#include "core/runtime/unicode_properties.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <vector>

#include "core/base/strings.h"

namespace quark::runtime::tokenizer_json {
namespace {

struct Run {
  char32_t first;
  char32_t last;
  char category[3];
};

constexpr Run kRuns[] = {
#include "core/runtime/unicode_general_category.inc"
};

bool IsKnownProperty(std::string_view property) {
  static constexpr std::string_view kNames[] = {
      "L",  "L&", "Lu", "Ll", "Lt", "Lm", "Lo", "M",  "Mn", "Mc", "Me", "N",  "Nd", "Nl", "No", "P",  "Pc",
      "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S",  "Sm", "Sc", "Sk", "So", "Z",  "Zs", "Zl", "Zp"};
  return std::find(std::begin(kNames), std::end(kNames), property) != std::end(kNames);
}

bool CategoryIn(std::string_view category, std::string_view property) {
  if (property == "L&") return category == "Lu" || category == "Ll" || category == "Lt";
  return property.size() == 1 ? category[0] == property[0] : category == property;
}

// "\x{41}-\x{5a}\x{61}-\x{7a}...": the property's ranges, adjacent runs merged, for use inside [...].
std::string RangesOf(std::string_view property) {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  for (const Run& run : kRuns) {
    if (!CategoryIn(run.category, property)) continue;
    if (!ranges.empty() && ranges.back().second + 1 == run.first) {
      ranges.back().second = run.last;
    } else {
      ranges.emplace_back(run.first, run.last);
    }
  }
  std::string out;
  char buffer[40];
  for (const auto& [first, last] : ranges) {
    if (first == last) {
      std::snprintf(buffer, sizeof(buffer), "\\x{%x}", static_cast<unsigned>(first));
    } else {
      std::snprintf(buffer, sizeof(buffer), "\\x{%x}-\\x{%x}", static_cast<unsigned>(first),
                    static_cast<unsigned>(last));
    }
    out += buffer;
  }
  return out;
}

}  // namespace

std::string_view GeneralCategory(char32_t code_point) {
  const Run* end = std::end(kRuns);
  const Run* run = std::upper_bound(std::begin(kRuns), end, code_point,
                                    [](char32_t c, const Run& r) { return c < r.first; });
  if (run == std::begin(kRuns)) return "Cn";
  --run;
  return code_point <= run->last ? std::string_view(run->category, 2) : std::string_view("Cn");
}

bool HasGeneralCategory(char32_t code_point, std::string_view property) {
  return CategoryIn(GeneralCategory(code_point), property);
}

absl::StatusOr<std::string> WithUnicode16Properties(std::string_view pattern, std::string_view where) {
  std::string out;
  out.reserve(pattern.size());
  bool in_class = false;
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 'Q') {  // a literal up to \E (or the end), copied as is
        const size_t end = pattern.find("\\E", i + 2);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop;
        continue;
      }
      if (next == 'p' || next == 'P') {
        std::string_view property;
        size_t stop = i + 2;
        if (stop < pattern.size() && pattern[stop] == '{') {
          const size_t close = pattern.find('}', stop);
          if (close == std::string_view::npos) {
            return absl::InvalidArgumentError(StrCat(where, ": regex has an unterminated \\", std::string(1, next),
                                                           "{ at offset ", i));
          }
          property = pattern.substr(stop + 1, close - stop - 1);
          stop = close + 1;
        } else if (stop < pattern.size()) {
          property = pattern.substr(stop, 1);
          stop += 1;
        }
        const bool negated = next == 'P';
        if (IsKnownProperty(property) && !(negated && in_class)) {
          const std::string ranges = RangesOf(property);
          out += in_class ? ranges : StrCat(negated ? "[^" : "[", ranges, "]");
          i = stop;
          continue;
        }
        out.append(pattern.substr(i, stop - i));
        i = stop;
        continue;
      }
      out.append(pattern.substr(i, 2));
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < pattern.size() && pattern[i] == '^') out += pattern[i++];
      if (i < pattern.size() && pattern[i] == ']') out += pattern[i++];  // a leading ] is a literal
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // [:alpha:]
      const size_t close = pattern.find(":]", i + 2);
      const size_t stop = close == std::string_view::npos ? pattern.size() : close + 2;
      out.append(pattern.substr(i, stop - i));
      i = stop;
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
    ++i;
  }
  return out;
}

}  // namespace quark::runtime::tokenizer_json
