// One K-quant super-block as a fixed quantization grid, for quantizers that choose each weight's code themselves
// (K-quant-aware GPTQ, core/algorithms/gptq_kquant.h): ggml's own scale search fixes the block's header (fp16 d,
// dmin and the 6-bit or 8-bit sub-block scales and mins) from 256 values, then single values are rounded onto that
// grid one at a time, as ggml's requantization rounds them (l = clamp(nearest_int((x + dmin·m) / (d·sc)), ...)), and
// their codes packed into the block. The value a code stands for is computed with dequantize_row_<t>'s expression, so
// a block built this way decodes (ours or ggml's) to exactly the values RoundInto returned. Q4_K, Q5_K and Q6_K.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/export/gguf_blocks.h"

namespace quark::exporter::gguf {

/// Whether KQuantGrid takes `type` (Q4_K, Q5_K, Q6_K).
bool IsKQuantGridType(GgmlType type);

class KQuantGrid {
 public:
  /// INVALID_ARGUMENT naming `type` when IsKQuantGridType(type) is false.
  static absl::Status Check(GgmlType type);

  /// `type` must pass Check.
  explicit KQuantGrid(GgmlType type) : type_(type) {}

  /// Fills `block` (RowBytes(type, 256) bytes) as quantize_<t> does for the 256 values `x` with the importance
  /// weights `qw` (256, or null: the reference quantizer): the header is the grid, the codes those of `x`.
  void Search(const float* x, const float* qw, void* block) const;

  /// Rounds `x` onto element `index` (0..255) of the block's grid, stores its code in `block` and returns the value
  /// the code decodes to. A sub-block whose d·sc is 0 decodes every code to −dmin·m (Q6_K: 0); its code is set to 0.
  float RoundInto(void* block, int index, float x) const;

 private:
  GgmlType type_;
};

}  // namespace quark::exporter::gguf
