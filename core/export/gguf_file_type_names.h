// llama-quantize's file type names the GGUF export takes, in the order of gguf_mixture.cc's table (a static_assert
// there keeps the two equal). Header-only: quarkd checks spec.gguf_type with it without linking the engine.
#pragma once

#include <string_view>

namespace quark::exporter::gguf {

inline constexpr std::string_view kFileTypeNames[] = {
    "F32",    "F16",    "BF16",   "Q4_0",   "Q4_1",   "Q5_0", "Q5_1",   "Q8_0",  "Q2_K",  "Q3_K_S",
    "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"};

}  // namespace quark::exporter::gguf
