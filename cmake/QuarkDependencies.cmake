# Every external dependency, found once. All are Debian bookworm packages
# (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(Torch REQUIRED)
include(QuarkEngineDependencies)
# The service's (server, worker, client).
find_package(gRPC CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(CURL REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
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
