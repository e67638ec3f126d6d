// OpenBLAS's own thread pool, found at run time: LibTorch sets its OpenMP threads but not OpenBLAS's, and a build
// against another BLAS (MKL in PyTorch's LibTorch) needs nothing of OpenBLAS.
#pragma once

namespace quark {

/// OpenBLAS's thread count; 0 when the process has no OpenBLAS.
int BlasThreads();

/// Sets OpenBLAS's thread count; no-op without OpenBLAS.
void SetBlasThreads(int threads);

}  // namespace quark
