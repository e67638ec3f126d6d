// #30 FP8 weights with E8M0 tile scales: an fp8_e4m3 `per_block` weight whose one scale per [R, C] tile is a power
// of two stored as an E8M0 byte (Quark's `scale_type: "float8_e8m0fnu"` with `block_size: [R, C]`). vLLM loads two
// forms (formats-2026.md 1.3, 1.4):
//   - C == 32: QuarkW8A8Mxfp8(scale_block_rows = R) (dispatch step 0), MXFP8 with 2-D scale blocks; weight_scale uint8
//     [N/R, K/32], repeat_interleaved over rows on load. The input is dynamic fp8_e4m3 per_group 32.
//   - [128, 128]: QuarkW8A8Fp8PerBlock under kFp8Static128BlockE8M0Sym (step 3a, DeepSeek-V3.1's "ue8m0" recipe);
//     weight_scale float8_e8m0fnu [N/128, K/128]. The input is dynamic fp8_e4m3 per_group 128.
// The engine spells it as a QuantSpec with qscheme per_block and scale_format e8m0 (no new field: quant_spec.h is
// included everywhere). Such a spec also answers IsMx() (scale_format e8m0), yet it is not OCP MX (blocks of 32 along
// one axis): the numerics and exports test IsE8m0Tiles first, or ask IsOcpMx. QuantParams hold the tile scales as
// float32 powers of two (like MX); RealQuantized (real_quant.h) holds their E8M0 bytes (log2(s) + 127), as for MX.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/config/quant_spec.h"

namespace quark {

/// An fp8 per_block weight with power-of-two (E8M0) tile scales.
inline bool IsE8m0Tiles(const QuantSpec& s) {
  return s.qscheme == QScheme::kPerBlock && s.scale_format == ScaleFormat::kE8M0;
}

/// OCP MX proper: shared E8M0 scales over blocks of 32 along one axis (IsMx() without E8M0 tiles).
inline bool IsOcpMx(const QuantSpec& s) { return s.IsMx() && !IsE8m0Tiles(s); }

/// The vLLM scheme an E8M0-tile weight loads as.
enum class E8m0TileForm {
  kMxfp8,     // block_size [R, 32]: QuarkW8A8Mxfp8, uint8 scales
  kFp8Block,  // block_size [128, 128]: QuarkW8A8Fp8PerBlock (kFp8Static128BlockE8M0Sym), float8_e8m0fnu scales
};

/// The form of `weight` (E8M0 tiles with a block size vLLM loads), nullopt otherwise.
std::optional<E8m0TileForm> E8m0TileFormOf(const QuantSpec& weight);

/// Quark's scale_type spelling of E8M0 tile scales.
inline constexpr const char* kE8m0ScaleTypeName = "float8_e8m0fnu";

/// One problem of a layer config: the field path and why.
struct E8m0TileIssue {
  std::string field;
  std::string message;
};

/// Checks an E8M0-tile weight spec (at `path`.weight) and the layer's input spec (at `path`.input_tensors, nullptr =
/// none) against what vLLM's steps 0 / 3a accept: fp8_e4m3, symmetric, static weight with block_size [R, 32] or
/// [128, 128], min_max; input fp8_e4m3 dynamic symmetric per_group with group_size == C. Empty when they fit.
std::vector<E8m0TileIssue> E8m0TileIssues(const QuantSpec& weight, const QuantSpec* input, const std::string& path);

}  // namespace quark
