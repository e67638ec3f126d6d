// Process start-up of the engine: must run before the first LibTorch op.
#pragma once

namespace quark {

struct EngineOptions {
  /// Intra-op threads; 0 = every hardware thread (LibTorch's default here is 1).
  int intra_op_threads = 0;
};

/// Sets ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 unless the user set it (Debian's oneDNN dies of SIGILL on
/// the AMX path of this CPU), puts the CPU's large tensors on huge pages (runtime/huge_page_allocator.h; not with
/// QUARK_HUGE_PAGES=0), then sets LibTorch's intra-op threads. Also reads QUARK_THREADS when
/// options.intra_op_threads is 0. Idempotent.
void InitEngine(const EngineOptions& options = {});

/// The thread count InitEngine chose (for logs and benchmarks).
int EngineThreads();

}  // namespace quark
