// NVFP4 fake quantization as a CUDA kernel (kernels/cpu/nvfp4_kernels.h's Nvfp4FakeQuant, the same element math:
// kernels/element/element_ops.h's Nvfp4*). Plain C++ header: callers need no CUDA headers.
#pragma once

#include <cstdint>

#include "kernels/cuda/quant_cuda.h"

namespace quark::kernels::cuda {

/// x, y: [rows, len] contiguous device memory (len % 16 == 0; y may be x); `global`: the tensor's global scale;
/// `blk`: [rows, len / 16] float32 e4m3 block scales in device memory, or nullptr to take each group's scale from its
/// own amax (NaN ignored). Enqueued on `stream`; returns the CUDA error code of the launch.
int Nvfp4FakeQuantCuda(const void* x, void* y, CudaElem elem, int64_t rows, int64_t len, float global,
                       const float* blk, void* stream);

}  // namespace quark::kernels::cuda
