// A stack on stderr when an engine process dies of a fatal signal. A crash on a machine that is lent for minutes
// leaves nothing to inspect afterwards (the H200's pipeline test died of SIGSEGV with only ctest's "Segmentation
// fault"), so every executable that links LibTorch reports where it died: the signal, the faulting address and the
// frames (glibc's backtrace: shared libraries' exported symbols by name, the rest as offsets), then dies of the same
// signal with its default action (exit status and core dump unchanged).
#pragma once

namespace quark {

/// Installs the report for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT wherever no handler is installed yet (it
/// never replaces one). Idempotent; core/base/CMakeLists.txt makes every LibTorch executable run it before main.
void InstallCrashReport();

}  // namespace quark
