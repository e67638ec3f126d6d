#include "worker/test_runners.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/worker/recording_sink.h"

namespace quark::worker {
namespace {

TEST(TestRunnersTest, ParsesModes) {
  EXPECT_TRUE(MakeTestRunner("noop").ok());
  EXPECT_TRUE(MakeTestRunner("sleep:0.5").ok());
  EXPECT_TRUE(MakeTestRunner("sleep:3").ok());
  for (const char* bad : {"", "sleep", "sleep:", "sleep:x", "sleep:-1", "fast"}) {
    absl::StatusOr<std::unique_ptr<JobRunner>> runner = MakeTestRunner(bad);
    EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(runner.status().message().find("--test-mode"), std::string::npos);
  }
}

TEST(TestRunnersTest, NoopCompletesAtOnce) {
  NoopJobRunner runner;
  RecordingSink sink;
  CancelToken cancel;
  absl::StatusOr<quark::v1::JobResult> result = runner.Run(quark::v1::Job(), sink, cancel);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->artifacts_size(), 0);
  ASSERT_EQ(sink.events().size(), 1u);
  EXPECT_EQ(sink.events()[0].fraction(), 1.0);
}

TEST(TestRunnersTest, SleepReportsEveryStep) {
  SleepJobRunner runner(std::chrono::milliseconds(40), 4);
  RecordingSink sink;
  CancelToken cancel;
  ASSERT_TRUE(runner.Run(quark::v1::Job(), sink, cancel).ok());
  std::vector<quark::v1::Progress> events = sink.events();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].layer(), 0);
  EXPECT_EQ(events[0].fraction(), 0.0);
  EXPECT_EQ(events[2].layer(), 2);
  EXPECT_EQ(events[2].num_layers(), 4);
  EXPECT_EQ(events[4].fraction(), 1.0);
  EXPECT_EQ(events[4].eta_seconds(), 0.0);
}

TEST(TestRunnersTest, SleepStopsOnCancel) {
  SleepJobRunner runner(std::chrono::seconds(600), 10);
  RecordingSink sink;
  CancelToken cancel;
  std::thread canceller([&] { cancel.Cancel(CancelToken::Reason::kCancelled); });
  absl::StatusOr<quark::v1::JobResult> result = runner.Run(quark::v1::Job(), sink, cancel);
  canceller.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
}

TEST(TestRunnersTest, SleepFailsOnLabel) {
  SleepJobRunner runner(std::chrono::milliseconds(10), 2);
  quark::v1::Job job;
  (*job.mutable_spec()->mutable_labels())["test-fail"] = "injected failure";
  RecordingSink sink;
  CancelToken cancel;
  absl::StatusOr<quark::v1::JobResult> result = runner.Run(job, sink, cancel);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(result.status().message(), "injected failure");
}

}  // namespace
}  // namespace quark::worker
