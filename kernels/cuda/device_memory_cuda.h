// The free memory of a CUDA device, for the engine's default device budget (core/runtime/device_memory.h). Plain C++
// declarations: callers need no CUDA headers.
#pragma once

#include <cstdint>

namespace quark::kernels::cuda {

/// Free bytes of CUDA device `device` (cudaMemGetInfo on it; the calling thread's current device is restored).
/// false when the runtime cannot answer (no such device, no driver).
bool FreeMemoryBytes(int device, int64_t* free_bytes);

}  // namespace quark::kernels::cuda
