#include "core/eval/greedy_generation.h"

#include <algorithm>

#include "core/base/strings.h"

namespace quark::eval {
namespace {

bool HoldsStopSequence(const std::string& text, const std::vector<std::string>& until) {
  return std::any_of(until.begin(), until.end(),
                     [&](const std::string& s) { return !s.empty() && text.find(s) != std::string::npos; });
}

}  // namespace

std::string CutAtStopSequences(std::string text, const std::vector<std::string>& until) {
  for (const std::string& term : until) {
    if (term.empty()) continue;
    const size_t at = text.find(term);
    if (at != std::string::npos) text.resize(at);
  }
  return text;
}

absl::StatusOr<Generation> GreedyContinue(KvCacheDecoder& decoder, const runtime::Tokenizer& tokenizer,
                                          const std::vector<int64_t>& context, const std::vector<std::string>& until,
                                          int64_t max_new_tokens) {
  if (context.empty()) return absl::InvalidArgumentError("the context holds no tokens");
  Generation out;
  out.context_tokens = static_cast<int64_t>(context.size());
  const int64_t eos = tokenizer.eos_id();
  decoder.Reset();
  auto logits = decoder.Append(context);
  std::vector<int64_t> text_tokens;  // the generated tokens without EOS
  while (logits.ok()) {
    const int64_t token = logits->argmax().item<int64_t>();
    out.tokens.push_back(token);
    if (token == eos) break;
    text_tokens.push_back(token);
    if (static_cast<int64_t>(out.tokens.size()) >= max_new_tokens) break;
    if (HoldsStopSequence(tokenizer.Decode(text_tokens), until)) break;
    logits = decoder.Append({token});
  }
  if (!logits.ok()) return logits.status();
  out.text = CutAtStopSequences(tokenizer.Decode(text_tokens), until);
  return out;
}

absl::StatusOr<Generation> GenerateUntil(KvCacheDecoder& decoder, const runtime::Tokenizer& tokenizer,
                                         const GenerationRequest& request, int64_t max_length) {
  if (request.max_gen_toks < 1 || request.max_gen_toks >= max_length) {
    return absl::InvalidArgumentError(StrCat("max_gen_toks ", request.max_gen_toks,
                                             " must be at least 1 and less than the model's max_length ", max_length));
  }
  auto encoded = tokenizer.EncodeWithBos(request.context);
  if (!encoded.ok()) return encoded.status();
  const int64_t max_context = max_length - request.max_gen_toks;
  std::vector<int64_t> context = *std::move(encoded);
  const bool truncated = static_cast<int64_t>(context.size()) > max_context;
  if (truncated) context.erase(context.begin(), context.end() - max_context);
  auto out = GreedyContinue(decoder, tokenizer, context, request.until, request.max_gen_toks);
  if (out.ok()) out->truncated = truncated;
  return out;
}

}  // namespace quark::eval
