// CUDA packing of element codes for export (int4 words, fp4 nibble pairs) with the CPU's packing functions, and the
// device queries the rest of the engine asks this library.
#include "kernels/cuda/cuda_launch.cuh"

namespace quark::kernels::cuda {
namespace {

struct Int4Order {
  int order[8];
};

__global__ void PackInt4Kernel(const uint8_t* codes, int64_t words, Int4Order o, int32_t* out) {
  QUARK_GRID_STRIDE(w, words) { out[w] = element::PackInt4Word(codes + w * 8, o.order); }
}

__global__ void PackFp4Kernel(const uint8_t* codes, int64_t bytes, uint8_t* out) {
  QUARK_GRID_STRIDE(i, bytes) { out[i] = element::PackFp4Byte(codes[2 * i], codes[2 * i + 1]); }
}

}  // namespace

int PackInt4Cuda(const uint8_t* codes, int64_t n, const int (&order)[8], int32_t* words, void* stream) {
  const int64_t count = n / 8;
  if (count == 0) return 0;
  Int4Order o;
  for (int i = 0; i < 8; ++i) o.order[i] = order[i];
  PackInt4Kernel<<<GridBlocks(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(codes, count, o, words);
  return LastLaunchError();
}

int PackFp4Cuda(const uint8_t* codes, int64_t n, uint8_t* bytes, void* stream) {
  const int64_t count = n / 2;
  if (count == 0) return 0;
  PackFp4Kernel<<<GridBlocks(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(codes, count, bytes);
  return LastLaunchError();
}

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" / "no device" error
    return 0;
  }
  return count;
}

const char* CudaErrorName(int code) { return cudaGetErrorName(static_cast<cudaError_t>(code)); }

}  // namespace quark::kernels::cuda
