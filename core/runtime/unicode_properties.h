// Unicode General_Category from a Unicode 16.0 table (unicode_general_category.inc, generated from ICU 76 by
// scripts/unicode/gen_general_category.sh), for the tokenizer's split patterns (issue #33, item 4). Debian
// bookworm's PCRE2 10.42 classifies \p{L}, \p{N}... with Unicode 14 tables and its ICU 72 knows Unicode 15: digits
// added in Unicode 15 and 16 (Kawi, Nag Mundari, Garay, Gurung Khema, Ol Onal, Sunuwar, Myanmar Extended-C, the
// outlined digits) were not \p{N} there, so ` 𞓰` split differently from Hugging Face's tokenizers.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace quark::runtime::tokenizer_json {

/// The two-letter General_Category of `code_point` ("Lu", "Nd", ...; "Cn" when unassigned in Unicode 16.0).
std::string_view GeneralCategory(char32_t code_point);

/// True when `code_point`'s category is `property`: a category ("Nd") or a major class ("N"; "L&" = Lu, Ll, Lt).
bool HasGeneralCategory(char32_t code_point, std::string_view property);

/// `pattern` (PCRE2 syntax) with every \p{X}, \pX and \P{X} whose X is a General_Category or major class (L, L&,
/// Lu, ..., N, Nd, ..., P..., S..., Z..., M...; not C, which holds the unassigned) replaced by the code point
/// ranges of the Unicode 16.0 table: a class of its own outside [...] and its ranges inside one. Left to PCRE2:
/// other properties (scripts, Any), \P{X} inside [...] (no range list can subtract there), \Q...\E literals.
/// InvalidArgument naming `where` for an unterminated \p{.
absl::StatusOr<std::string> WithUnicode16Properties(std::string_view pattern, std::string_view where);

}  // namespace quark::runtime::tokenizer_json
