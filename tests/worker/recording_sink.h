// Test helper: a ProgressSink that keeps every event.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "worker/job_runner.h"

namespace quark::worker {

class RecordingSink : public ProgressSink {
 public:
  void Report(const quark::v1::Progress& progress) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(progress);
  }
  void Log(const std::string& line) override {
    std::lock_guard<std::mutex> lock(mu_);
    logs_.push_back(line);
  }
  std::vector<quark::v1::Progress> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::vector<std::string> Phases() const {
    std::vector<std::string> out;
    for (const auto& e : events()) {
      if (out.empty() || out.back() != e.phase()) out.push_back(e.phase());
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<quark::v1::Progress> events_;
  std::vector<std::string> logs_;
};

}  // namespace quark::worker
