// Which grid GPTQ's fused blocks round a weight spec on (core/algorithms/gptq_fused_blocks.cc), in plain Config terms:
// the job estimator (core/estimate, no LibTorch) charges the launches the run will make from the same answer.
#pragma once

#include "core/config/e8m0_tiles.h"
#include "core/config/quant_spec.h"
#include "core/config/quant_types.h"

namespace quark {

enum class GptqBlockGrid {
  /// The column loop rounds it (about ten device operations a column): casts, and the legacy MX spelling without an
  /// element type.
  kNone,
  /// Integers with a scale and zero point, per tensor, channel, group or 2-D tile.
  kInteger,
  /// fp8 / fp6 / fp4 elements with their scales (E8M0 tiles among them), OCP MX's float elements and NVFP4.
  kFloat,
  /// MXINT8: int8 elements under each block's power-of-two scale.
  kMxInt,
  /// W4A8's two stages: an fp8 e4m3 value under the per-tensor scale, then int4 per channel on it.
  kW4A8,
};

inline GptqBlockGrid GptqBlockGridOf(const QuantSpec& spec) {
  const DType element = spec.ElementType();
  if (IsCastType(spec.dtype) || element == DType::kMx || IsCastType(element)) return GptqBlockGrid::kNone;
  if (spec.IsProgressive()) return GptqBlockGrid::kW4A8;
  if (IsFloatFormat(element)) return GptqBlockGrid::kFloat;
  return IsOcpMx(spec) ? GptqBlockGrid::kMxInt : GptqBlockGrid::kInteger;
}

}  // namespace quark
