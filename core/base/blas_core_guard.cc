// The OpenBLAS core guard's start-up hook (issue #33, item 0), an object of its own so that only the binaries that
// ask for it run it: core/base/CMakeLists.txt makes every executable that links LibTorch (through quark_torch) pull
// this object in with the linker's --undefined=QuarkOpenBlasCoreGuard.
#include "core/base/blas_core.h"

// Runs before main: OpenBLAS, a shared library the executable depends on, has chosen its kernels by then (shared
// libraries' constructors run before the executable's).
extern "C" void QuarkOpenBlasCoreGuard() { quark::EnsureBlasCoreMatchesCpu(); }
__attribute__((constructor)) static void RunQuarkOpenBlasCoreGuard() { QuarkOpenBlasCoreGuard(); }
