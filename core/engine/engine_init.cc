#include "core/engine/engine_init.h"

#include <cstdlib>
#include <string>
#include <thread>

#include <ATen/Parallel.h>

#include "core/base/blas_core.h"
#include "core/base/blas_threads.h"
#include "core/base/log.h"
#include "core/runtime/huge_page_allocator.h"

namespace quark {
namespace {

int ThreadsFromEnvironment() {
  const char* value = std::getenv("QUARK_THREADS");
  if (value == nullptr || *value == '\0') return 0;
  try {
    return std::max(0, std::stoi(value));
  } catch (const std::exception&) {
    return 0;  // a malformed value falls back to the hardware count
  }
}

int g_threads = 0;

// What the OpenBLAS core guard (core/base/blas_core_guard.cc, before main) chose, once per process: it ran before
// logging was configured.
void LogBlasCoreChoiceOnce() {
  static const bool logged = [] {
    const std::string choice = BlasCoreChoiceForLog();
    if (!choice.empty()) log::Get("engine")->warn("{}", choice);
    return true;
  }();
  (void)logged;
}

}  // namespace

void InitEngine(const EngineOptions& options) {
  LogBlasCoreChoiceOnce();
  // overwrite = 0: a user's own choice of ISA wins.
  setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", /*overwrite=*/0);
  runtime::InstallHugePageCpuAllocator();
  int threads = options.intra_op_threads > 0 ? options.intra_op_threads : ThreadsFromEnvironment();
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads != g_threads) {
    at::set_num_threads(threads);
    // OpenBLAS's pool spins for work: on a busy machine more threads than LibTorch's cost more than they compute.
    SetBlasThreads(threads);
    g_threads = threads;
  }
}

int EngineThreads() { return g_threads; }

}  // namespace quark
