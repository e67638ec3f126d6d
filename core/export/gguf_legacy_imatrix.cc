#include "core/export/gguf_legacy_imatrix.h"

#include <cmath>
#include <cstring>

#include "core/export/gguf_blocks.h"
#include "core/export/gguf_kquant_search.h"

namespace quark::exporter::gguf {
namespace {

// The row's blocks with the weights of `qw`: `block(xb, weight, out)` fills one block from its 32 values and their
// weights qw·√(σ² + x²) (ggml's expression order: sum_x2 accumulated in float, σ² = sum_x2 / n).
template <typename Block, typename BlockFn>
void ImatrixRow(const float* x, Block* y, int64_t n_per_row, const float* qw, BlockFn block) {
  float sum_x2 = 0;
  for (int64_t j = 0; j < n_per_row; ++j) sum_x2 += x[j] * x[j];
  const float sigma2 = sum_x2 / static_cast<float>(n_per_row);
  float weight[kBlockSize];
  for (int64_t ib = 0; ib < n_per_row / kBlockSize; ++ib) {
    const float* xb = x + kBlockSize * ib;
    const float* w = qw + kBlockSize * ib;
    for (int j = 0; j < kBlockSize; ++j) weight[j] = w[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
    block(xb, weight, y + ib);
  }
}

// quantize_<t>: the reference over all rows without weights, else the weighted version row by row.
template <typename Block, typename Ref, typename BlockFn>
int64_t QuantizeRows(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw, Ref ref,
                     BlockFn block) {
  auto* y = static_cast<Block*>(dst);
  const int64_t nb = n_per_row / kBlockSize;
  if (qw == nullptr) {
    ref(src, y, nrow * n_per_row);
  } else {
    for (int64_t r = 0; r < nrow; ++r) ImatrixRow(src + r * n_per_row, y + r * nb, n_per_row, qw, block);
  }
  return nrow * nb * static_cast<int64_t>(sizeof(Block));
}

// Codes L (0..31 for five bits) into the nibbles and the fifth bits of a Q5 block.
template <typename Block, typename Code>
void PackQ5(const Code* L, Block* y) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t xi0 = static_cast<uint8_t>(L[j]), xi1 = static_cast<uint8_t>(L[j + 16]);
    y->qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + kBlockSize / 2);
  }
  std::memcpy(y->qh, &qh, sizeof(qh));
}

// make_qkx3_quants as the Q4_1 / Q5_1 blocks call it: codes 0..nmax into L, the block's fp16 scale and min.
template <typename Block>
void FitWithMin(const float* xb, const float* weight, int nmax, uint8_t* L, Block* y) {
  uint8_t Laux[kBlockSize];
  float min;
  const float d = kquant::MakeQkx3Quants(kBlockSize, nmax, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
  y->d = Fp32ToFp16(d);
  y->m = Fp32ToFp16(-min);
}

}  // namespace

int64_t QuantizeQ4_0(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  return QuantizeRows<BlockQ4_0>(src, dst, nrow, n_per_row, qw, QuantizeRowQ4_0Ref,
                                 [](const float* xb, const float* weight, BlockQ4_0* y) {
                                   int8_t L[kBlockSize];
                                   y->d = Fp32ToFp16(kquant::MakeQxQuants(kBlockSize, 8, xb, L, 1, weight));
                                   for (int j = 0; j < 16; ++j) y->qs[j] = L[j] | (L[j + 16] << 4);
                                 });
}

int64_t QuantizeQ4_1(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  return QuantizeRows<BlockQ4_1>(src, dst, nrow, n_per_row, qw, QuantizeRowQ4_1Ref,
                                 [](const float* xb, const float* weight, BlockQ4_1* y) {
                                   uint8_t L[kBlockSize];
                                   FitWithMin(xb, weight, 15, L, y);
                                   for (int j = 0; j < 16; ++j) y->qs[j] = L[j] | (L[j + 16] << 4);
                                 });
}

int64_t QuantizeQ5_0(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  return QuantizeRows<BlockQ5_0>(src, dst, nrow, n_per_row, qw, QuantizeRowQ5_0Ref,
                                 [](const float* xb, const float* weight, BlockQ5_0* y) {
                                   int8_t L[kBlockSize];
                                   y->d = Fp32ToFp16(kquant::MakeQxQuants(kBlockSize, 16, xb, L, 1, weight));
                                   PackQ5(L, y);
                                 });
}

int64_t QuantizeQ5_1(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) {
  return QuantizeRows<BlockQ5_1>(src, dst, nrow, n_per_row, qw, QuantizeRowQ5_1Ref,
                                 [](const float* xb, const float* weight, BlockQ5_1* y) {
                                   uint8_t L[kBlockSize];
                                   FitWithMin(xb, weight, 31, L, y);
                                   PackQ5(L, y);
                                 });
}

}  // namespace quark::exporter::gguf
