// Progress helpers shared by runners.
#pragma once

#include <chrono>

#include "worker/job_runner.h"

namespace quark::worker {

/// Forwards to `inner`, mapping the fraction f of one stage into lo + f * (hi - lo) of the whole job and filling
/// in an ETA (from the elapsed time of the whole job) when the reporter gave none.
class ScaledProgressSink : public ProgressSink {
 public:
  ScaledProgressSink(ProgressSink& inner, double lo, double hi, std::chrono::steady_clock::time_point job_start);
  void Report(const quark::v1::Progress& progress) override;
  void Log(const std::string& line) override { inner_.Log(line); }
  void Metrics(const std::map<std::string, double>& metrics) override { inner_.Metrics(metrics); }

 private:
  ProgressSink& inner_;  // outlives this adapter: both live on the runner's stack
  double lo_;
  double hi_;
  std::chrono::steady_clock::time_point job_start_;
};

}  // namespace quark::worker
