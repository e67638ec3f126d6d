#include "core/base/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace quark {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

// Only write(2) below: the handler runs in a process whose heap or locks may be what broke.
void Write(const char* text) {
  const size_t length = std::strlen(text);
  if (write(STDERR_FILENO, text, length) < 0) return;
}

void WriteHex(uintptr_t value) {
  char digits[2 + 2 * sizeof(value) + 1];
  char* p = digits + sizeof(digits) - 1;
  *p = '\0';
  do {
    *--p = "0123456789abcdef"[value & 0xF];
    value >>= 4;
  } while (value != 0);
  *--p = 'x';
  *--p = '0';
  Write(p);
}

const char* SignalName(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "fatal signal";
  }
}

void OnFatalSignal(int signal, siginfo_t* info, void* /*context*/) {
  Write("\n*** quark: ");
  Write(SignalName(signal));
  if (signal != SIGABRT && info != nullptr) {
    Write(" at address ");
    WriteHex(reinterpret_cast<uintptr_t>(info->si_addr));
  }
  Write("; stack (innermost first):\n");
  void* frames[64];
  const int count = backtrace(frames, 64);
  backtrace_symbols_fd(frames, count, STDERR_FILENO);
  // SA_RESETHAND has put the default action back: the process ends as it would have without this report.
  raise(signal);
}

alignas(16) char alternate_stack[64 * 1024];  // a stack overflow still gets its report

}  // namespace

void InstallCrashReport() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  // backtrace() loads libgcc_s on its first call, which allocates: do that here, not inside a handler.
  void* warm_up[1];
  backtrace(warm_up, 1);
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof(alternate_stack);
  sigaltstack(&stack, nullptr);
  for (int signal : kFatalSignals) {
    struct sigaction current {};
    if (sigaction(signal, nullptr, &current) != 0) continue;
    const bool has_handler = (current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL;
    if (has_handler) continue;
    struct sigaction report {};
    report.sa_sigaction = OnFatalSignal;
    report.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&report.sa_mask);
    sigaction(signal, &report, nullptr);
  }
}

}  // namespace quark

// Runs before main in every executable that links LibTorch (core/base/CMakeLists.txt: --undefined=QuarkCrashReport).
extern "C" void QuarkCrashReport() { quark::InstallCrashReport(); }
__attribute__((constructor)) static void RunQuarkCrashReport() { QuarkCrashReport(); }
