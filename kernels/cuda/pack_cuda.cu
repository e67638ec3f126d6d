// CUDA packing of element codes for export (int4 words, fp4 nibble pairs) with the CPU's packing functions, and the
// device queries the rest of the engine asks this library (and the launches' SM count).
#include <atomic>

#include "kernels/cuda/cuda_map.cuh"

namespace quark::kernels::cuda {
namespace {

constexpr int kMaxDevices = 64;

/// A nibble order known only at run time.
struct Int4Order {
  int order[8];
  __device__ __forceinline__ int At(int i) const { return order[i]; }
};

/// The two orders the exports use, as constants: with them the vector path's nibble picks compile to register
/// shifts (a run-time order indexes the 16 loaded bytes through local memory).
template <int O0, int O1, int O2, int O3, int O4, int O5, int O6, int O7>
struct FixedInt4Order {
  __host__ __device__ __forceinline__ int At(int i) const {
    constexpr int kOrder[8] = {O0, O1, O2, O3, O4, O5, O6, O7};
    return kOrder[i];
  }
  static bool Is(const int (&order)[8]) {
    for (int i = 0; i < 8; ++i) {
      if (order[i] != FixedInt4Order{}.At(i)) return false;
    }
    return true;
  }
};
using ReorderInt4 = FixedInt4Order<0, 2, 4, 6, 1, 3, 5, 7>;     // kernels/cpu/pack_kernels.h kInt4Reorder
using SequentialInt4 = FixedInt4Order<0, 1, 2, 3, 4, 5, 6, 7>;  // kInt4Sequential

/// The 16 code bytes of one aligned vector.
__device__ __forceinline__ void LoadCodes16(const uint8_t* p, uint8_t (&c)[16]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 16; ++k) c[k] = static_cast<uint8_t>(element::WordElement<1>(w, k));
}

// Work unit: 8 codes -> one word; a vector is 2 units (16 code bytes in, 8 bytes out).
template <typename Order>
__global__ void PackInt4Kernel(const uint8_t* codes, element::VecPlan<int64_t> p, Order o, int32_t* out) {
  int order[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) order[i] = o.At(i);
  QUARK_GRID_STRIDE(item, p.Items()) {
    if (item < p.vectors) {
      const int64_t w = p.VectorStart(item);
      uint8_t c[16];
      LoadCodes16(codes + w * 8, c);
      *reinterpret_cast<int2*>(out + w) = make_int2(element::PackInt4Word(c, order),
                                                    element::PackInt4Word(c + 8, order));
    } else {
      const int64_t w = p.ScalarIndex(item - p.vectors);
      out[w] = element::PackInt4Word(codes + w * 8, order);
    }
  }
}

// Work unit: 2 codes -> one byte; a vector is 8 units (16 code bytes in, 8 bytes out).
__global__ void PackFp4Kernel(const uint8_t* codes, element::VecPlan<int64_t> p, uint8_t* out) {
  QUARK_GRID_STRIDE(item, p.Items()) {
    if (item < p.vectors) {
      const int64_t i = p.VectorStart(item);
      uint8_t c[16];
      LoadCodes16(codes + 2 * i, c);
      OutVec<uint8_t, 8> bytes;
#pragma unroll
      for (int k = 0; k < 8; ++k) bytes.Set(k, element::PackFp4Byte(c[2 * k], c[2 * k + 1]));
      bytes.Store(out + i);
    } else {
      const int64_t i = p.ScalarIndex(item - p.vectors);
      out[i] = element::PackFp4Byte(codes[2 * i], codes[2 * i + 1]);
    }
  }
}

}  // namespace

int PackInt4Cuda(const uint8_t* codes, int64_t n, const int (&order)[8], int32_t* words, void* stream) {
  const int64_t count = n / 8;
  if (count == 0) return 0;
  const element::VecPlan<int64_t> p =
      element::MakeVecPlan(reinterpret_cast<uintptr_t>(codes), 8, reinterpret_cast<uintptr_t>(words), 4, count, 2);
  auto s = static_cast<cudaStream_t>(stream);
  if (ReorderInt4::Is(order)) {
    auto kernel = PackInt4Kernel<ReorderInt4>;
    kernel<<<GridBlocksFor(kernel, p.Items()), kThreads, 0, s>>>(codes, p, ReorderInt4{}, words);
  } else if (SequentialInt4::Is(order)) {
    auto kernel = PackInt4Kernel<SequentialInt4>;
    kernel<<<GridBlocksFor(kernel, p.Items()), kThreads, 0, s>>>(codes, p, SequentialInt4{}, words);
  } else {
    Int4Order o;
    for (int i = 0; i < 8; ++i) o.order[i] = order[i];
    auto kernel = PackInt4Kernel<Int4Order>;
    kernel<<<GridBlocksFor(kernel, p.Items()), kThreads, 0, s>>>(codes, p, o, words);
  }
  return LastLaunchError();
}

int PackFp4Cuda(const uint8_t* codes, int64_t n, uint8_t* bytes, void* stream) {
  const int64_t count = n / 2;
  if (count == 0) return 0;
  const element::VecPlan<int64_t> p =
      element::MakeVecPlan(reinterpret_cast<uintptr_t>(codes), 2, reinterpret_cast<uintptr_t>(bytes), 1, count, 8);
  auto kernel = PackFp4Kernel;
  kernel<<<GridBlocksFor(kernel, p.Items()), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(codes, p, bytes);
  return LastLaunchError();
}

int DeviceSmCount() {
  static std::atomic<int> counts[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    (void)cudaGetLastError();
    return 0;
  }
  int sms = counts[device].load(std::memory_order_relaxed);
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    counts[device].store(sms, std::memory_order_relaxed);
  }
  return sms;
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
