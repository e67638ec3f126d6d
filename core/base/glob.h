// Module-name patterns as Quark and vLLM read them.
#pragma once

#include <string_view>

namespace quark {

/// fnmatch(3) semantics ('*' also crosses '.'), the way Quark matches layer_quant_config and exclude.
bool GlobMatch(std::string_view pattern, std::string_view name);

/// True when the pattern has a glob metacharacter (vLLM's exclude list accepts none).
bool HasGlobChars(std::string_view pattern);

}  // namespace quark
