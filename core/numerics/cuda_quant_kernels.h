// The CUDA kernels (kernels/cuda) as the numerics' kernels of CUDA tensors (quant_kernels.h). Compiled only where
// nvcc built quark_kernels_cuda; QuantKernelsFor registers them the first time a non-CPU device asks.
#pragma once

namespace quark {

/// Makes the CUDA kernels the QuantKernels of c10::DeviceType::CUDA: integer, small-float and MX fake quantization
/// run as CUDA kernels on the tensors' memory (bit-identical to the CPU's); what has no CUDA kernel (range reductions,
/// MX with static exponents) runs as tensor ops on the device.
void RegisterCudaQuantKernels();

}  // namespace quark
