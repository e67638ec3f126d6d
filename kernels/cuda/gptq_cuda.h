// The sequential part of a GPTQ block (kernels/element/gptq_row.h) as one CUDA launch: one thread per output row.
// Plain C++ header: callers need no CUDA headers.
#pragma once

#include "kernels/element/gptq_row.h"

namespace quark::kernels::cuda {

/// Runs the segment of `args` (device pointers) for every row on `stream` (a cudaStream_t; nullptr = the legacy
/// default stream). Returns the CUDA error code of the launch (0 = success).
int GptqBlockCuda(const element::GptqBlockArgs& args, void* stream);

}  // namespace quark::kernels::cuda
