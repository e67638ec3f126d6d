// ggml's MXFP4 block type (GGML_TYPE_MXFP4 = 39, what llama.cpp's converter writes gpt-oss's experts in): 32 weights
// per 17-byte block, one E8M0 exponent byte e and 16 bytes of E2M1 codes, byte j holding weight j (low nibble) and
// weight j + 16 (high nibble), as Q4_0 lays them out; w = kvalues[q] * 2^(e - 128), kvalues the E2M1 values doubled
// (0, 1, 2, 3, 4, 6, 8, 12 and their negatives). The encoder is ggml-quants.c's quantize_row_mxfp4_ref (exponent
// floor(log2(amax)) - 2, nearest code, the first on a tie), which llama-quantize uses: an OCP MXFP4 block the engine
// quantized (same exponent rule) encodes back to its own values. Its traits row is in gguf_blocks.cc's table.
// Kept out of gguf_blocks.h's GgmlType enum for now: that header is included by much of the tree.
#pragma once

#include <cstdint>

#include "core/export/gguf_blocks.h"

namespace quark::exporter::gguf {

/// GGML_TYPE_MXFP4.
inline constexpr GgmlType kGgmlMxfp4 = static_cast<GgmlType>(39);
/// llama_ftype LLAMA_FTYPE_MOSTLY_MXFP4_MOE: the experts in MXFP4, the rest of the weights in another type.
inline constexpr uint32_t kFileTypeMxfp4Moe = 38;

struct BlockMxfp4 {
  uint8_t e;  // E8M0 exponent
  uint8_t qs[kBlockSize / 2];
};
static_assert(sizeof(BlockMxfp4) == 17, "block_mxfp4 is 17 bytes");

/// quantize_row_mxfp4_ref / dequantize_row_mxfp4 over `k` values (a multiple of 32).
void QuantizeRowMxfp4Ref(const float* x, BlockMxfp4* y, int64_t k);
void DequantizeRowMxfp4(const BlockMxfp4* x, float* y, int64_t k);

}  // namespace quark::exporter::gguf
