// lm-evaluation-harness's generate_until for the HF causal LM (lm_eval/models/huggingface.py generate_until,
// models/utils.py handle_stop_sequences / postprocess_generated_text), greedy, on a KvCacheDecoder:
//   - the context is encoded with BOS (the tokenizer's add_special_tokens default) and left-truncated to
//     max_length - max_gen_toks tokens;
//   - tokens are the argmax of each step's logits (do_sample false), at most max_gen_toks, stopping at the EOS
//     token or as soon as the decoded continuation holds a stop sequence (HF's stop-string criteria);
//   - the decoded continuation (special tokens skipped) is cut at each stop sequence in turn (split(term)[0]).
//     lm-eval also adds the EOS token's text to the stop sequences; here the EOS token itself ends the generation
//     (GSM8K lists "</s>" anyway).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/eval/kv_cache_decoder.h"
#include "core/runtime/tokenizer.h"

namespace quark::eval {

struct GenerationRequest {
  std::string context;
  std::vector<std::string> until;
  int64_t max_gen_toks = 256;
};

struct Generation {
  std::string text;             // after the stop sequences are cut
  std::vector<int64_t> tokens;  // generated, the EOS token included when it ended the generation
  int64_t context_tokens = 0;   // after truncation
  bool truncated = false;       // the context lost tokens on the left
};

/// lm-eval's postprocess_generated_text: `text` cut at each non-empty stop sequence in turn.
std::string CutAtStopSequences(std::string text, const std::vector<std::string>& until);

/// Greedy tokens after `context` (taken as it is), at most `max_new_tokens`, stopping at the EOS token or when the
/// decoded continuation holds a stop sequence; the text is cut at the stop sequences. The decoder is reset first.
absl::StatusOr<Generation> GreedyContinue(KvCacheDecoder& decoder, const runtime::Tokenizer& tokenizer,
                                          const std::vector<int64_t>& context, const std::vector<std::string>& until,
                                          int64_t max_new_tokens);

/// InvalidArgument when max_gen_toks >= max_length (lm-eval's assertion) or the context encodes to nothing; the
/// decoder's errors pass through. The decoder must hold max_length positions.
absl::StatusOr<Generation> GenerateUntil(KvCacheDecoder& decoder, const runtime::Tokenizer& tokenizer,
                                         const GenerationRequest& request, int64_t max_length);

}  // namespace quark::eval
