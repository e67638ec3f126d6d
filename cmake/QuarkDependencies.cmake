# Every external dependency, found once. All are Debian bookworm packages
# (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)

# nvcc, when QUARK_WITH_CUDA is on: the CUDA language is enabled before find_package(Torch), because a LibTorch built
# with CUDA (PyTorch 2.x's, Debian's libtorch-cuda-dev) compares the CUDA compiler's version with the toolkit's in its
# CMake config and fails ("Found two conflicting CUDA versions") when no CUDA compiler is enabled yet. The toolkit at
# /usr/local/cuda wins over an nvcc on PATH unless CMAKE_CUDA_COMPILER or CUDACXX names one.
if(QUARK_WITH_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # LibTorch's CUDA config sets CMAKE_CUDA_ARCHITECTURES to OFF (it passes its own -gencode flags to FindCUDA
    # users), so the kernels take their architectures from QUARK_CUDA_ARCHITECTURES instead.
    if(DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(QUARK_CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}" CACHE STRING "CUDA architectures of the kernels")
    else()
      set(QUARK_CUDA_ARCHITECTURES 80 90 CACHE STRING "CUDA architectures of the kernels")
      set(CMAKE_CUDA_ARCHITECTURES ${QUARK_CUDA_ARCHITECTURES})
    endif()
    enable_language(CUDA)
  endif()
endif()

find_package(Torch REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
if(QUARK_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  include(GoogleTest)
endif()

# LibTorch's own target carries -D_GLIBCXX_USE_CXX11_ABI; wrap it with the
# flags every engine target needs.
add_library(quark_torch INTERFACE)
target_link_libraries(quark_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(quark_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
# at::parallel_for is a header template that ATen makes parallel only where _OPENMP is defined (ParallelOpenMP.h
# defines INTRA_OP_PARALLEL from it): code compiled without -fopenmp runs every "parallel" loop on one thread. So
# engine code is compiled with OpenMP, as LibTorch itself is (AT_PARALLEL_OPENMP).
find_package(OpenMP REQUIRED COMPONENTS CXX)
target_link_libraries(quark_torch INTERFACE OpenMP::OpenMP_CXX)
