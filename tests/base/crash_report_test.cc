// The crash report (core/base/crash_report.h): a fatal signal prints the signal, the address and a stack on stderr,
// and the process still dies of that signal; a handler someone else installed is never replaced.
#include "core/base/crash_report.h"

#include <signal.h>

#include <cstdlib>

#include <gtest/gtest.h>

namespace quark {
namespace {

TEST(CrashReportDeathTest, AFatalSignalPrintsItsStackAndStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        InstallCrashReport();
        raise(SIGSEGV);
      },
      ::testing::KilledBySignal(SIGSEGV), "\\*\\*\\* quark: SIGSEGV at address 0x[0-9a-f]+; stack \\(innermost first\\):\n.+");
  EXPECT_EXIT(
      {
        InstallCrashReport();
        std::abort();
      },
      ::testing::KilledBySignal(SIGABRT), "\\*\\*\\* quark: SIGABRT; stack");
}

void Mine(int) {}

TEST(CrashReportTest, NeverReplacesAHandlerAlreadyThere) {
  struct sigaction own {};
  own.sa_handler = Mine;
  sigemptyset(&own.sa_mask);
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGFPE, &own, &before), 0);
  InstallCrashReport();
  struct sigaction after {};
  ASSERT_EQ(sigaction(SIGFPE, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, &Mine);
  struct sigaction segv {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &segv), 0);
  EXPECT_NE(segv.sa_flags & SA_SIGINFO, 0) << "SIGSEGV has the report";
  sigaction(SIGFPE, &before, nullptr);
}

}  // namespace
}  // namespace quark
