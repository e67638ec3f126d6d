#include "core/base/glob.h"

#include <fnmatch.h>

#include <string>

namespace quark {

bool GlobMatch(std::string_view pattern, std::string_view name) {
  const std::string p(pattern), n(name);
  return fnmatch(p.c_str(), n.c_str(), 0) == 0;
}

bool HasGlobChars(std::string_view pattern) {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

}  // namespace quark
