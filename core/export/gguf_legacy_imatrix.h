// ggml's quantize_q4_0 / quantize_q4_1 / quantize_q5_0 / quantize_q5_1 (ggml-quants.c), the legacy 32-weight blocks
// quantized with an importance matrix as llama-quantize --imatrix does: per row σ² = mean(x²), per block the weights
// qw·√(σ² + x²), the scale from make_qx_quants (Q4_0: codes −8..7, Q5_0: −16..15) or, with a min,
// make_qkx3_quants (Q4_1: 0..15, Q5_1: 0..31; rmin −0.9, rdelta 0.05, 36 steps). Without weights, the reference
// rows (quantize_row_<t>_ref), as ggml does. `qw`: one weight per column (n_per_row); returns the bytes written.
#pragma once

#include <cstdint>

namespace quark::exporter::gguf {

int64_t QuantizeQ4_0(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
int64_t QuantizeQ4_1(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
int64_t QuantizeQ5_0(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);
int64_t QuantizeQ5_1(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw);

}  // namespace quark::exporter::gguf
