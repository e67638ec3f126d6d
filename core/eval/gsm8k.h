// GSM8K's answer extraction and scoring as lm-evaluation-harness 0.4.13 (lm_eval/tasks/gsm8k/gsm8k.yaml, version
// 3.0; filters/extraction.py RegexFilter; api/metrics.py exact_match_hf_evaluate):
//   strict-match      regex "#### (\-?[0-9\.\,]+)", the first match's group, stripped; "[invalid]" when none
//   flexible-extract  regex "(-?[$0-9.,]{2,})|(-?[0-9]+)", the last match's first non-empty group, stripped
//   exact_match       prediction and reference (the whole answer) both with re.sub of ",", "\$", "(?s).*#### ",
//                     "\.$" (in that order), then lower-cased; 1 when equal
// Python's `re` and `str.strip` are reproduced for these patterns: `$` also matches before a final "\n", and strip
// removes Python's whitespace (ASCII and the Unicode spaces; lower-casing is ASCII, the answers are numbers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace quark::eval {

/// lm-eval's stop sequences for gsm8k.
const std::vector<std::string>& Gsm8kStopSequences();
/// max_gen_toks (lm-eval's default: gsm8k.yaml sets none).
constexpr int64_t kGsm8kMaxGenToks = 256;

/// The filters' outputs for one generation.
std::string Gsm8kStrictMatch(const std::string& generation);
std::string Gsm8kFlexibleExtract(const std::string& generation);

/// exact_match's normalisation of a prediction or a reference.
std::string Gsm8kNormalize(const std::string& text);

/// exact_match of a filtered prediction against the doc's answer.
bool Gsm8kExactMatch(const std::string& prediction, const std::string& reference);

}  // namespace quark::eval
