// Runners for tests and benchmarks of the job service: they exercise the whole protocol without an engine.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "worker/job_runner.h"

namespace quark::worker {

/// `quark-worker --test-mode noop`: completes every job at once with no artifacts and metric seconds_total 0.
class NoopJobRunner : public JobRunner {
 public:
  using JobRunner::Run;
  absl::StatusOr<quark::v1::JobResult> Run(const quark::v1::Job& job, const LeaseContext& lease,
                                           ProgressSink& progress, const CancelToken& cancel) override;
};

/// `quark-worker --test-mode sleep:SECONDS`: pretends to quantize `steps` layers over `duration`, reporting
/// progress at the start (layer 0) and after each (phase "quantize", layer i/N, fraction, ETA) and ending early with CANCELLED on cancel.
/// A job whose spec has the label "test-fail" = MESSAGE fails with INTERNAL MESSAGE after the first step
/// (for failure and retry tests).
class SleepJobRunner : public JobRunner {
 public:
  explicit SleepJobRunner(std::chrono::milliseconds duration, int steps = 10);
  using JobRunner::Run;
  absl::StatusOr<quark::v1::JobResult> Run(const quark::v1::Job& job, const LeaseContext& lease,
                                           ProgressSink& progress, const CancelToken& cancel) override;

 private:
  std::chrono::milliseconds duration_;
  int steps_;
};

/// Parses a --test-mode value: "noop", "sleep:SECONDS" (fractions allowed, e.g. "sleep:0.5").
/// INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<std::unique_ptr<JobRunner>> MakeTestRunner(std::string_view mode);

}  // namespace quark::worker
