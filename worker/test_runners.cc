#include "worker/test_runners.h"

#include <cstdlib>
#include <string>

#include "worker/storage/strings.h"

namespace quark::worker {

absl::StatusOr<quark::v1::JobResult> NoopJobRunner::Run(const quark::v1::Job& job, const LeaseContext&,
                                                        ProgressSink& progress, const CancelToken& cancel) {
  if (cancel.IsCancelled()) return absl::CancelledError(str::Cat("job ", job.id(), " cancelled"));
  quark::v1::Progress done;
  done.set_phase("quantize");
  done.set_fraction(1.0);
  done.set_message("noop test mode");
  progress.Report(done);
  quark::v1::JobResult result;
  (*result.mutable_metrics())["seconds_total"] = 0.0;
  return result;
}

SleepJobRunner::SleepJobRunner(std::chrono::milliseconds duration, int steps)
    : duration_(duration), steps_(steps > 0 ? steps : 1) {}

absl::StatusOr<quark::v1::JobResult> SleepJobRunner::Run(const quark::v1::Job& job, const LeaseContext&,
                                                         ProgressSink& progress, const CancelToken& cancel) {
  auto started = std::chrono::steady_clock::now();
  auto step = duration_ / steps_;
  auto fail = job.spec().labels().find("test-fail");
  progress.Log(str::Cat("sleep test mode: ", steps_, " steps of ", step.count(), " ms"));
  // A first event at once, so watchers see the job running before the first step ends.
  quark::v1::Progress start;
  start.set_phase("quantize");
  start.set_num_layers(steps_);
  start.set_eta_seconds(std::chrono::duration<double>(duration_).count());
  start.set_message(str::Cat("layer 0/", steps_));
  progress.Report(start);
  for (int i = 1; i <= steps_; ++i) {
    if (cancel.WaitFor(step)) return absl::CancelledError(str::Cat("job ", job.id(), " cancelled at layer ", i - 1));
    if (fail != job.spec().labels().end()) return absl::InternalError(fail->second);
    quark::v1::Progress p;
    p.set_phase("quantize");
    p.set_layer(i);
    p.set_num_layers(steps_);
    p.set_samples(static_cast<int64_t>(i) * 8);
    p.set_fraction(static_cast<double>(i) / steps_);
    p.set_eta_seconds(std::chrono::duration<double>(step * (steps_ - i)).count());
    p.set_message(str::Cat("layer ", i, "/", steps_));
    progress.Report(p);
  }
  quark::v1::JobResult result;
  (*result.mutable_metrics())["seconds_total"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

absl::StatusOr<std::unique_ptr<JobRunner>> MakeTestRunner(std::string_view mode) {
  if (mode == "noop") return std::make_unique<NoopJobRunner>();
  if (str::StartsWith(mode, "sleep:")) {
    std::string number(mode.substr(6));
    char* end = nullptr;
    double seconds = std::strtod(number.c_str(), &end);
    if (!number.empty() && end == number.c_str() + number.size() && seconds >= 0 && seconds <= 86400) {
      return std::make_unique<SleepJobRunner>(
          std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
    }
  }
  return absl::InvalidArgumentError(
      str::Cat("--test-mode: \"", mode, "\" is not one of noop, sleep:SECONDS (0..86400), copy"));
}

}  // namespace quark::worker
