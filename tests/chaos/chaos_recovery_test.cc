#include "tests/chaos/chaos_recovery.h"

#include <gtest/gtest.h>

namespace quark::chaos {
namespace {

TEST(ChaosRecoveryTest, ParsesFaultLinesAndNamesTheBadOnes) {
  std::vector<std::string> bad;
  std::vector<Fault> faults =
      ParseFaults("kill-worker 100 100 w1\ns3-500 200 1700\nnonsense\ndisk-full 5 3 w0\n", &bad);
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].kind, "kill-worker");
  EXPECT_EQ(faults[0].target, "w1");
  EXPECT_EQ(faults[1].end_ms, 1700);
  EXPECT_EQ(faults[1].target, "");
  EXPECT_EQ(bad, (std::vector<std::string>{"nonsense", "disk-full 5 3 w0"}));
}

TEST(ChaosRecoveryTest, ATargetedFaultHitsOnlyJobsRunningOnItsTarget) {
  std::map<std::string, JobTimeline> jobs;
  jobs["on-w1"] = {{{"w1", 50, 0}}, {40, 60, 400}};  // open at the fault on w1: next event 400
  jobs["on-w2"] = {{{"w2", 50, 0}}, {40, 60, 900}};  // another worker
  jobs["ended"] = {{{"w1", 10, 90}}, {5, 10, 90}};   // its attempt ended before the fault
  jobs["later"] = {{{"w1", 150, 0}}, {150, 160}};    // started after it
  Recovery r = RecoveryOf(Fault{"kill-worker", 100, 100, "w1"}, jobs);
  EXPECT_EQ(r.affected_jobs, 1);
  EXPECT_EQ(r.not_recovered, 0);
  EXPECT_EQ(r.recovery_ms, 300);
}

TEST(ChaosRecoveryTest, AJobLeasedInsideAWindowIsHitToo) {
  std::map<std::string, JobTimeline> jobs;
  // Leased on the full disk at 1200, handed back at 1300, run again elsewhere: next event 3600.
  jobs["handed-back"] = {{{"w0", 1200, 1300}, {"w1", 3600, 0}}, {0, 1200, 1300, 3600}};
  Recovery r = RecoveryOf(Fault{"disk-full", 1000, 3000, "w0"}, jobs);
  EXPECT_EQ(r.affected_jobs, 1);
  EXPECT_EQ(r.recovery_ms, 2600);
}

TEST(ChaosRecoveryTest, AWindowedFaultCountsFromItsStartToTheFirstEventAfterItsEnd) {
  std::map<std::string, JobTimeline> jobs;
  jobs["a"] = {{{"w1", 0, 0}}, {0, 150, 2100}};  // an event inside the window does not count
  jobs["b"] = {{{"w2", 0, 2500}}, {0, 2500}};
  jobs["stuck"] = {{{"w3", 0, 0}}, {0, 50}};      // nothing after the fault began
  jobs["done"] = {{{"w4", 0, 1500}}, {0, 1500}};  // ended inside the window: not held up
  Recovery r = RecoveryOf(Fault{"s3-500", 100, 2000, ""}, jobs);
  EXPECT_EQ(r.affected_jobs, 3);
  EXPECT_EQ(r.ended_during, 1);
  EXPECT_EQ(r.not_recovered, 1);
  EXPECT_EQ(r.recovery_ms, 2400);
}

}  // namespace
}  // namespace quark::chaos
