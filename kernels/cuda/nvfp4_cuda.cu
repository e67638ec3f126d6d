// One thread per NVFP4 group of 16: the group's amax, its block scale (or the given one), then every element's
// e2m1 value dequantized, as the CPU kernel does element for element.
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/nvfp4_cuda.h"

namespace quark::kernels::cuda {
namespace {

constexpr int kGroup = element::kNvfp4Group;

template <typename T>
__global__ void FakeNvfp4Kernel(const T* x, T* y, int64_t groups, float global, const float* blk) {
  QUARK_GRID_STRIDE(k, groups) {
    const int64_t off = k * kGroup;
    float v[kGroup];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      v[i] = Load(x, off + i);
      const float a = element::Float(element::Bits(v[i]) & 0x7FFFFFFFu);  // |v|, as std::fabs
      amax = a > amax ? a : amax;                                         // NaN ignored
    }
    const float s = blk ? blk[k] : element::Nvfp4BlockScale(amax, global);
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      StoreResult(y, off + i, v[i], element::Nvfp4Dequant(element::Nvfp4Value(v[i], s, global), s, global));
    }
  }
}

}  // namespace

int Nvfp4FakeQuantCuda(const void* x, void* y, CudaElem elem, int64_t rows, int64_t len, float global,
                       const float* blk, void* stream) {
  const int64_t groups = rows * (len / kGroup);
  if (groups == 0) return 0;
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    FakeNvfp4Kernel<T><<<GridBlocks(groups), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), groups, global, blk);
    return LastLaunchError();
  });
}

}  // namespace quark::kernels::cuda
