// The sequential part of a GPTQ block (kernels/element/gptq_row.h) in one launch: one thread per row of the weight.
// A row's block of the working weight is read and written ~count^2 / 2 times (each column's error updates every
// later column), and neighbouring rows lie a whole row apart, so the rows' blocks are first copied, coalesced, into
// shared memory (a tile of 32 rows x up to 128 columns, one warp a tile, padded against bank conflicts), updated
// there, and written back once. Blocks wider than the tile update the working weight in place.
#include <cuda_runtime.h>

#include "kernels/cuda/gptq_cuda.h"

namespace quark::kernels::cuda {
namespace {

constexpr int kTileRows = 32;  // one warp
constexpr int kTileColumns = 128;
constexpr int kPitch = kTileColumns + 1;  // row r's column c at r * kPitch + c: a warp's 32 rows hit 32 banks

template <int kGrid, int kMode, bool kFloatZp, int kCast>
__global__ void GptqTileKernel(element::GptqBlockArgs a) {
  __shared__ float tile[kTileRows * kPitch];
  const int64_t row0 = blockIdx.x * static_cast<int64_t>(kTileRows);
  const int lane = static_cast<int>(threadIdx.x);
  const int rows = static_cast<int>(a.rows - row0 < kTileRows ? a.rows - row0 : kTileRows);
  const int first = static_cast<int>(a.begin), count = static_cast<int>(a.count);
  for (int rr = 0; rr < rows; ++rr) {
    const float* src = a.work + (row0 + rr) * a.ldw + a.block_begin;
    for (int c = first + lane; c < count; c += kTileRows) tile[rr * kPitch + c] = src[c];
  }
  __syncwarp();
  if (lane < rows) element::GptqRow<kGrid, kMode, kFloatZp, kCast>(a, row0 + lane, tile + lane * kPitch);
  __syncwarp();
  for (int rr = 0; rr < rows; ++rr) {
    float* dst = a.work + (row0 + rr) * a.ldw + a.block_begin;
    for (int c = first + lane; c < count; c += kTileRows) dst[c] = tile[rr * kPitch + c];
  }
}

template <int kGrid, int kMode, bool kFloatZp, int kCast>
__global__ void GptqRowKernel(element::GptqBlockArgs a) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r < a.rows) element::GptqRow<kGrid, kMode, kFloatZp, kCast>(a, r, a.work + r * a.ldw + a.block_begin);
}

}  // namespace

int GptqBlockCuda(const element::GptqBlockArgs& args, void* stream) {
  if (args.rows <= 0 || args.begin >= args.end) return 0;
  const auto s = static_cast<cudaStream_t>(stream);
  const auto blocks = static_cast<unsigned>((args.rows + kTileRows - 1) / kTileRows);
  element::DispatchGptqRow(args, [&](auto grid, auto mode, auto float_zp, auto cast) {
    constexpr int k = decltype(grid)::value;
    constexpr int m = decltype(mode)::value;
    constexpr bool z = decltype(float_zp)::value;
    constexpr int c = decltype(cast)::value;
    if (args.count <= kTileColumns) {
      GptqTileKernel<k, m, z, c><<<blocks, kTileRows, 0, s>>>(args);
    } else {
      GptqRowKernel<k, m, z, c><<<blocks, kTileRows, 0, s>>>(args);
    }
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace quark::kernels::cuda
