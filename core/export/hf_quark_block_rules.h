// vLLM's dispatch of a `per_block` weight in an HF-quark export (quark.py 095bfa45, formats-2026.md 1.3), for the
// checker: step 0 (MXFP8 with 2-D scale blocks: E8M0 tiles [R, 32] -> QuarkW8A8Mxfp8), step 2 (per_block without
// block_size raises) and step 3a (fp8 128x128 blocks -> QuarkW8A8Fp8PerBlock, its E8M0 key when scale_type is
// float8_e8m0fnu). Anything else finds no scheme and vLLM raises.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace quark::exporter {

/// Why the layer's `weight` (a per_block spec) and `input_tensors` (spec or null) load in no vLLM scheme, naming the
/// field; nullopt when step 0 or 3a takes them.
std::optional<std::string> VllmPerBlockProblem(const nlohmann::ordered_json& weight,
                                               const nlohmann::ordered_json& input);

}  // namespace quark::exporter
