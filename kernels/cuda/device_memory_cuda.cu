#include "kernels/cuda/device_memory_cuda.h"

#include <cuda_runtime.h>

namespace quark::kernels::cuda {

bool FreeMemoryBytes(int device, int64_t* free_bytes) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return false;
  if (previous != device && cudaSetDevice(device) != cudaSuccess) return false;
  size_t free = 0, total = 0;
  const bool ok = cudaMemGetInfo(&free, &total) == cudaSuccess;
  if (previous != device) (void)cudaSetDevice(previous);  // best effort: the answer is already read
  if (ok) *free_bytes = static_cast<int64_t>(free);
  return ok;
}

}  // namespace quark::kernels::cuda
