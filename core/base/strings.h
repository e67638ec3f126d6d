// String building that accepts std::string_view. (Debian's abseil has its own string_view type, so
// absl::StrCat/StrJoin reject std::string_view arguments; these helpers take anything fmt can format.)
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace quark {

/// Concatenates the arguments' text forms: StrCat("group_size: ", 100, " does not divide ", dim).
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", args), ...);
  return out;
}

/// Joins a range's elements with a separator: StrJoin(names, ", ").
template <typename Range>
std::string StrJoin(const Range& range, std::string_view separator) {
  return fmt::format("{}", fmt::join(range, separator));
}

}  // namespace quark
