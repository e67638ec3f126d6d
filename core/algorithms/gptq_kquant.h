// K-quant-aware GPTQ (#37 item 4): GPTQ whose quantizer is a GGUF K-quant type (Q4_K, Q5_K, Q6_K), so that what
// GPTQ optimizes is exactly what llama.cpp will run.
//
// GPTQ walks the columns of W [N, K]; a K-quant super-block is 256 consecutive columns of one row, with fp16 d / dmin
// and 6-bit (Q4_K/Q5_K) or 8-bit (Q6_K) sub-block scales and mins. The column loop runs in lazy blocks of exactly
// one super-block, so when a super-block starts every update of the columns before it has been applied (as GPTQ with
// groups observed as they start: Quark's default). Then, row by row:
//   1. ggml's own scale search (quantize_<t>, with the importance matrix's quant weights of those 256 columns when
//      given, else the reference quantizer) fixes the super-block's header from the current, already updated values;
//   2. each column in turn is rounded onto that fixed grid (ggml's requantization: round, clamp), its code packed into
//      the block, and its error (w − q) / U_jj spread over the super-block's later columns (U the upper Cholesky factor
//      of the damped inverse Hessian, GptqFactorOf);
// and after the super-block the errors update every later column at once: W[:, i2:] −= Err · U[i1:i2, i2:].
// The blocks are the GGUF tensor's bytes as they are: they decode (dequantize_row_<t>) to exactly `weight`, which
// re-running the search on `weight` would not promise (another header may win on the new values).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/algorithms/gptq.h"
#include "core/export/gguf_blocks.h"

namespace quark::algorithms {

struct GptqKQuantResult {
  exporter::gguf::GgmlType type = exporter::gguf::GgmlType::kQ4_K;
  /// [N, K] float32: what `blocks` decode to, bit for bit.
  at::Tensor weight;
  /// N rows of RowBytes(type, K) bytes: the GGUF tensor's data.
  std::vector<uint8_t> blocks;
  double columns_seconds = 0;
};

/// `weight` [N, K] float32 / bfloat16 / float16 with K a multiple of 256; `factor` from GptqFactorOf without act order
/// (a K-quant's super-blocks are runs of consecutive columns); `quant_weights` [K] float32, the importance matrix's
/// column weights as llama-quantize passes them, or undefined for none. INVALID_ARGUMENT naming the field for a type
/// other than Q4_K/Q5_K/Q6_K, K not a multiple of 256, act order, or shapes that disagree.
absl::StatusOr<GptqKQuantResult> GptqKQuantizeWeight(const at::Tensor& weight, const GptqFactor& factor,
                                                     exporter::gguf::GgmlType type, const at::Tensor& quant_weights);

}  // namespace quark::algorithms
