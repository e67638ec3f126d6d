#include "core/config/llama_cpp_rules.h"

#include <algorithm>
#include <variant>

#include "core/base/strings.h"

namespace quark {

bool QuantizesByLlamaCppRules(bool has_scheme, const std::string& gguf_type, const std::vector<std::string>& exports) {
  return !has_scheme && !gguf_type.empty() && exports == std::vector<std::string>{"gguf"};
}

LlamaCppPrecursor PrecursorKind(const AlgoConfig& algo) {
  if (std::holds_alternative<RotationAlgo>(algo) || std::holds_alternative<SmoothQuantAlgo>(algo)) {
    return LlamaCppPrecursor::kNoQuantizer;
  }
  if (std::holds_alternative<AwqAlgo>(algo)) return LlamaCppPrecursor::kKQuantQuantizer;
  if (const auto* gptq = std::get_if<GptqAlgo>(&algo); gptq && gptq->method == HessianMethod::kGptq) {
    return LlamaCppPrecursor::kKQuantRounding;
  }
  return LlamaCppPrecursor::kRefused;
}

absl::Status CheckAlgorithmsBeforeLlamaCppRules(const std::vector<AlgoConfig>& algos,
                                                const std::function<std::string(size_t)>& field,
                                                const std::string& scheme_hint, bool allow_kquant_rounding) {
  for (size_t i = 0; i < algos.size(); ++i) {
    const LlamaCppPrecursor kind = PrecursorKind(algos[i]);
    if (kind == LlamaCppPrecursor::kKQuantRounding && !allow_kquant_rounding) {
      return absl::InvalidArgumentError(
          StrCat(field(i), ": ", AlgoName(algos[i]), " needs ", scheme_hint,
                 " in a job (K-quant-aware GPTQ before llama.cpp's rules runs in `quark quantize` only: its blocks are "
                 "not in layer checkpoints yet; rotation, smooth and awq may come before them here)"));
    }
    if (kind != LlamaCppPrecursor::kRefused) continue;
    return absl::InvalidArgumentError(
        StrCat(field(i), ": ", AlgoName(algos[i]), " needs ", scheme_hint,
               " (with a gguf_type alone llama.cpp's rules quantize the weights; only rotation, smooth and awq, which "
               "transform the float weights, and gptq, which rounds to the K-quant types itself, may come before "
               "them)"));
  }
  return absl::OkStatus();
}

bool RoundsToKQuants(const std::vector<AlgoConfig>& algos) {
  return std::any_of(algos.begin(), algos.end(),
                     [](const AlgoConfig& a) { return PrecursorKind(a) == LlamaCppPrecursor::kKQuantRounding; });
}

bool NeedsKQuantQuantizer(const std::vector<AlgoConfig>& algos) {
  return std::any_of(algos.begin(), algos.end(),
                     [](const AlgoConfig& a) { return PrecursorKind(a) == LlamaCppPrecursor::kKQuantQuantizer; });
}

}  // namespace quark
