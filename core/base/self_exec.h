// Re-executing this process with its own arguments, for settings that libraries read once when they are loaded
// (before main): OpenBLAS's core type (blas_core.h), OpenMP's wait policy (openmp_wait_policy.h).
#pragma once

namespace quark {

/// Replaces this process's image with /proc/self/exe and the arguments of /proc/self/cmdline, under the current
/// environment (the process id stays the same). Returns only when it could not: no /proc, or execv failed.
bool ReexecuteSelf();

}  // namespace quark
