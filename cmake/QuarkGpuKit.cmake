# The GPU kit (QUARK_GPU_KIT=ON): what a session on a GPU machine without a package registry builds and runs first.
#   kernels/cpu, kernels/cuda          the CPU and CUDA quantization kernels
#   core/numerics (quark_quant_kernels) the device seam: CPU kernels and LibTorch tensor-op kernels
#   tests/kernels, tests/numerics      element_ops_test, launch_plan_test, cuda_kernels_test (gpu), tensor_op_kernels_test,
#                                      tensor_op_kernels_cuda_test (gpu)
#   bench/kernels                      cuda_kernels_bench
# Its only dependencies are LibTorch (the machine's PyTorch, or Debian's libtorch-dev), nvcc, and GoogleTest, built
# from source (QUARK_GTEST_SOURCE_DIR: /usr/src/googletest of Debian's `googletest` package, unpacked by
# scripts/gpu/run.sh) with the machine's compiler and LibTorch's C++ ABI; without it an installed GTest is used.
# No gRPC, protobuf, abseil or spdlog: scripts/gpu/prepare.sh carries only what this file needs.
#
# QUARK_GPU_KIT_ENGINE=ON adds the engine (core/, the `quark` command, algo_bench) and the tests that run it on a
# device (QUARK_KIT_ENGINE_TESTS), against the engine's other dependencies (QuarkEngineDependencies.cmake) found
# through CMAKE_PREFIX_PATH / PKG_CONFIG_PATH: bookworm's packages, unpacked by run.sh (their shared libraries need
# glibc >= 2.36 and the C++11 ABI; run.sh checks the first, this file the second).
option(QUARK_GPU_KIT_ENGINE "The GPU kit also builds the engine and its device tests" OFF)
set(QUARK_KIT_ENGINE_TESTS gptq_tensor_ops_test gptq_cuda_test device_streaming_cuda_test device_quantize_cuda_test
  device_moe_cuda_test CACHE STRING "The engine tests the GPU kit builds (names of quark_add_test targets)")
set(QUARK_GTEST_SOURCE_DIR "" CACHE PATH "GoogleTest source tree (googletest package's /usr/src/googletest)")

# Stock CMake 3.25.1 (bookworm's) fails in FindCUDAToolkit on CUDA 13 (no nvToolsExt) for projects requiring 3.25
# (see kernels/cuda/CMakeLists.txt); a CUDA LibTorch's config runs FindCUDAToolkit too, so the kit reads as 3.24 there.
if(CMAKE_VERSION VERSION_LESS 3.25.2)
  set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
endif()
find_package(Threads REQUIRED)
# nvcc first, so that a CUDA LibTorch's own CUDA checks see the same compiler.
if(QUARK_WITH_CUDA AND NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
# A CUDA LibTorch's config (Caffe2/public/cuda.cmake) sets CMAKE_CUDA_ARCHITECTURES to OFF in this scope ("we can't
# rely on it"): the kernels would then be built for nvcc's default architecture and JIT-compiled from PTX on the
# device. The architectures asked for (run.sh: 90) are put back.
set(quark_cuda_architectures "${CMAKE_CUDA_ARCHITECTURES}")
# A pip PyTorch links its own protobuf statically, and its Caffe2Config makes protobuf::libprotobuf an alias of an
# empty target when no such target exists yet; FindProtobuf then keeps that alias, and proto/ links no protobuf at
# all (found on the H200: `quark` failed to link with 800 undefined protobuf symbols). The engine's protobuf (the
# kit's) is found first, so that the target is the real library.
if(QUARK_GPU_KIT_ENGINE)
  find_package(Protobuf REQUIRED)
endif()
find_package(Torch REQUIRED)
if(quark_cuda_architectures)
  set(CMAKE_CUDA_ARCHITECTURES "${quark_cuda_architectures}")
else()
  unset(CMAKE_CUDA_ARCHITECTURES)
endif()
message(STATUS "GPU kit: LibTorch ${Torch_VERSION} from ${Torch_DIR}; TORCH_CXX_FLAGS '${TORCH_CXX_FLAGS}'")

add_library(quark_torch INTERFACE)
target_link_libraries(quark_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(quark_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND)
  target_link_libraries(quark_torch INTERFACE OpenMP::OpenMP_CXX)
else()
  message(WARNING "GPU kit: no OpenMP for the C++ compiler; the CPU reference kernels run on one thread")
endif()

# Everything in the kit, GoogleTest included, is compiled with LibTorch's C++ ABI (pip wheels and Debian differ).
string(REGEX MATCH "_GLIBCXX_USE_CXX11_ABI=([01])" abi "${TORCH_CXX_FLAGS}")
set(quark_torch_cxx11_abi "")
if(abi)
  set(quark_torch_cxx11_abi ${CMAKE_MATCH_1})
  add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=${quark_torch_cxx11_abi})
endif()

enable_testing()
if(QUARK_GTEST_SOURCE_DIR)
  if(NOT EXISTS "${QUARK_GTEST_SOURCE_DIR}/CMakeLists.txt")
    message(FATAL_ERROR "QUARK_GTEST_SOURCE_DIR=${QUARK_GTEST_SOURCE_DIR} holds no CMakeLists.txt (expected the "
                        "googletest package's /usr/src/googletest)")
  endif()
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK ON CACHE BOOL "" FORCE)
  add_subdirectory(${QUARK_GTEST_SOURCE_DIR} ${PROJECT_BINARY_DIR}/googletest EXCLUDE_FROM_ALL SYSTEM)
  foreach(lib IN ITEMS gtest gtest_main gmock gmock_main)
    if(NOT TARGET GTest::${lib})
      add_library(GTest::${lib} ALIAS ${lib})
    endif()
  endforeach()
else()
  find_package(GTest CONFIG REQUIRED)
endif()
include(GoogleTest)
include(QuarkHelpers)

include_directories(${PROJECT_SOURCE_DIR})
if(NOT QUARK_GPU_KIT_ENGINE)
  add_subdirectory(kernels)
  add_subdirectory(core/numerics)
  if(QUARK_BUILD_TESTS)
    add_subdirectory(tests)
  endif()
  add_subdirectory(bench/kernels)
  return()
endif()

# The engine: Debian's libraries are built with the C++11 ABI; a LibTorch without it cannot share std::string with
# them (every absl::Status message would cross that line).
if(quark_torch_cxx11_abi STREQUAL "0")
  message(FATAL_ERROR "GPU kit engine: LibTorch ${Torch_VERSION} uses the pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0); "
                      "the engine's Debian libraries need the C++11 one: build the kernels-only kit instead")
endif()
include(QuarkEngineDependencies)
# PyTorch's wheels ship fmt 11's headers in torch/include, which LibTorch's include path would put before the kit's
# prefix: bookworm's spdlog 1.10 needs the fmt 9 it was built with (and the engine links libfmt.so.9), so the
# prefix's fmt headers come first for every target of the engine.
get_target_property(quark_fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
if(quark_fmt_includes)
  include_directories(BEFORE SYSTEM ${quark_fmt_includes})
endif()
# Debian keeps OpenSSL's configuration headers (opensslconf.h, configuration.h) under the multiarch folder, which the
# compiler searches by itself only under /usr: in the kit's prefix it has to be named.
file(GLOB quark_openssl_multiarch LIST_DIRECTORIES true "${OPENSSL_INCLUDE_DIR}/*-linux-gnu")
if(quark_openssl_multiarch)
  set_property(TARGET OpenSSL::Crypto APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${quark_openssl_multiarch})
endif()
include_directories(${PROJECT_BINARY_DIR}/proto ${PROJECT_BINARY_DIR}/generated)
configure_file(cmake/quark_version.h.in ${PROJECT_BINARY_DIR}/generated/quark/version.h @ONLY)
add_subdirectory(proto)
add_subdirectory(kernels)
add_subdirectory(core)
if(QUARK_BUILD_TESTS)
  add_subdirectory(tests)
endif()
add_subdirectory(bench/kernels)
add_subdirectory(bench/algorithms)
add_subdirectory(bench/quantize)  # pass_memory_bench only
