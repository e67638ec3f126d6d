// Which algorithms may run before llama.cpp's K-quant rules (#37 item 4). A GGUF export with a gguf_type and no
// engine scheme (no preset, no config, GGUF the only export) quantizes the float model as llama-quantize does; the
// algorithms before it only transform the float weights, as AMD Quark's "AWQ, then export K-quants". This one place
// decides it for `quark quantize`, the worker, quarkd's submit validation and the engine. No LibTorch.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/config/quant_spec.h"

namespace quark {

/// Whether a run quantizes by llama.cpp's rules alone: no engine scheme, a gguf_type, and GGUF the only export.
bool QuantizesByLlamaCppRules(bool has_scheme, const std::string& gguf_type, const std::vector<std::string>& exports);

/// What an algorithm needs to run before llama.cpp's rules.
enum class LlamaCppPrecursor {
  kNoQuantizer,      // rotation, SmoothQuant: they transform the float weights without simulating a quantizer
  kKQuantQuantizer,  // AWQ: its scale and clip searches simulate each linear's GGUF type (quantize + dequantize)
  kKQuantRounding,   // GPTQ (method gptq): rounds the mixture's Q4_K/Q5_K/Q6_K tensors itself, onto super-block grids
                     // ggml's search fixes (core/algorithms/gptq_kquant.h); the writer takes its blocks as they are
  kRefused,          // the rest round or tune the engine's own scheme (GPTAQ, Qronos, AutoRound, AutoSmoothQuant)
};

LlamaCppPrecursor PrecursorKind(const AlgoConfig& algo);

/// OK when every entry of `algos` may run before llama.cpp's rules; else INVALID_ARGUMENT naming the first refused
/// entry as `field(i)` ("--quant-algo", "spec.algo_config[2]") and saying what it needs (`scheme_hint`: the caller's
/// words for a scheme, "--scheme or --config" / "spec.preset or spec.config"). `allow_kquant_rounding`: whether the
/// caller runs K-quant-aware GPTQ (`quark quantize`; jobs do not: its blocks are not in layer checkpoints yet).
absl::Status CheckAlgorithmsBeforeLlamaCppRules(const std::vector<AlgoConfig>& algos,
                                                const std::function<std::string(size_t)>& field,
                                                const std::string& scheme_hint, bool allow_kquant_rounding);

/// Whether any entry rounds to the K-quant types itself (K-quant-aware GPTQ).
bool RoundsToKQuants(const std::vector<AlgoConfig>& algos);

/// Whether any entry needs the K-quant quantizer (the engine then plans each linear's GGUF type before the layers).
bool NeedsKQuantQuantizer(const std::vector<AlgoConfig>& algos);

}  // namespace quark
