# hipify for the engine's CUDA kernels and their tests: cmake -DIN=file -DOUT=file -P hipify.cmake.
#
# What AMD's hipify-perl does for this code, as a fixed list of renames (Debian ships hipcc but no hipify; the kernels
# use a small part of the CUDA runtime): the CUDA runtime header, calls and types become HIP's (cudaX -> hipX, one
# attribute named differently), the full-warp shuffle becomes HIP's with an explicit width of 32 (an AMD wavefront has
# 64 lanes: width 32 keeps each 32-lane warp of the CUDA code its own), CUDA's compiler macros become HIP's, and the
# namespace kernels::cuda, the Cuda names, the files' cuda parts and the CUDA messages become hip / Hip / HIP, so that
# both libraries can be linked into one program. `__syncwarp()` becomes `__syncthreads()`: the one kernel that calls
# it (gptq_cuda.cu's tile kernel) runs blocks of exactly one warp, where the two are the same barrier (HIP 5.2 has no
# __syncwarp). The renames are checked by compiling the result (kernels/hip, tests/kernels); anything CUDA-only left
# behind fails that compile.
if(NOT DEFINED IN OR NOT DEFINED OUT)
  message(FATAL_ERROR "hipify.cmake: -DIN=<cuda source> -DOUT=<hip source>")
endif()
file(READ "${IN}" text)

# Headers: device sources take HIP's whole runtime, host-compiled ones (.cc, .h) its API only.
if(OUT MATCHES "\\.(hip|cuh)$")
  string(REPLACE "#include <cuda_runtime.h>" "#include <hip/hip_runtime.h>" text "${text}")
else()
  string(REPLACE "#include <cuda_runtime.h>" "#include <hip/hip_runtime_api.h>" text "${text}")
endif()
# The files' own includes: kernels/cuda/cuda_launch.cuh -> kernels/hip/hip_launch.cuh (every cuda in the path).
set(previous "")
while(NOT previous STREQUAL text)
  set(previous "${text}")
  string(REGEX REPLACE "(#include \"[^\"\n]*)cuda" "\\1hip" text "${text}")
endwhile()

string(REPLACE "cudaDevAttrMultiProcessorCount" "hipDeviceAttributeMultiprocessorCount" text "${text}")
string(REGEX REPLACE "__shfl_xor_sync\\(0xFFFFFFFFu, ([^,()]+), ([^,()]+)\\)" "__shfl_xor(\\1, \\2, 32)" text "${text}")
string(REPLACE "__syncwarp()" "__syncthreads()" text "${text}")
string(REPLACE "__CUDA_ARCH__" "__HIP_DEVICE_COMPILE__" text "${text}")
string(REPLACE "__CUDACC__" "__HIPCC__" text "${text}")
string(REGEX REPLACE "cuda([A-Z])" "hip\\1" text "${text}")
string(REPLACE "kernels::cuda" "kernels::hip" text "${text}")
string(REPLACE "Cuda" "Hip" text "${text}")
string(REPLACE "CUDA" "HIP" text "${text}")
foreach(left IN ITEMS "__shfl_xor_sync" "__syncwarp" "cuda_runtime.h" "cudaStream")
  string(FIND "${text}" "${left}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "hipify.cmake: ${IN} still has ${left} after the renames")
  endif()
endforeach()
file(WRITE "${OUT}" "// Generated from ${IN} by cmake/hipify.cmake: edit the CUDA source.\n${text}")
