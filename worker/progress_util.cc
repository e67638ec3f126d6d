#include "worker/progress_util.h"

#include <algorithm>

namespace quark::worker {

ScaledProgressSink::ScaledProgressSink(ProgressSink& inner, double lo, double hi,
                                       std::chrono::steady_clock::time_point job_start)
    : inner_(inner), lo_(lo), hi_(hi), job_start_(job_start) {}

void ScaledProgressSink::Report(const quark::v1::Progress& progress) {
  quark::v1::Progress scaled = progress;
  double f = std::clamp(progress.fraction(), 0.0, 1.0);
  double overall = lo_ + f * (hi_ - lo_);
  scaled.set_fraction(overall);
  if (scaled.eta_seconds() <= 0 && overall > 0.01 && overall < 1.0) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - job_start_).count();
    scaled.set_eta_seconds(elapsed * (1.0 - overall) / overall);
  }
  inner_.Report(scaled);
}

}  // namespace quark::worker
