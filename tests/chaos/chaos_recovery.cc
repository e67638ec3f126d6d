#include "tests/chaos/chaos_recovery.h"

#include <algorithm>
#include <sstream>

namespace quark::chaos {

std::vector<Fault> ParseFaults(const std::string& text, std::vector<std::string>* bad) {
  std::vector<Fault> faults;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    Fault fault;
    if (!(fields >> fault.kind >> fault.start_ms >> fault.end_ms) || fault.end_ms < fault.start_ms) {
      bad->push_back(line);
      continue;
    }
    fields >> fault.target;
    faults.push_back(fault);
  }
  return faults;
}

Recovery RecoveryOf(const Fault& fault, const std::map<std::string, JobTimeline>& jobs) {
  Recovery recovery;
  for (const auto& [id, job] : jobs) {
    const bool hit = std::any_of(job.attempts.begin(), job.attempts.end(), [&](const AttemptSpan& a) {
      // Running when the fault began, or started while it lasted (a lease taken on a full disk).
      const bool open = a.start_ms <= fault.end_ms && (a.end_ms == 0 || a.end_ms > fault.start_ms);
      return open && (fault.target.empty() || a.worker_id == fault.target);
    });
    if (!hit) continue;
    auto next = std::upper_bound(job.event_ms.begin(), job.event_ms.end(), fault.end_ms);
    if (next == job.event_ms.end() && !job.event_ms.empty() && job.event_ms.back() > fault.start_ms) {
      ++recovery.ended_during;  // its last event (the end) came while the fault lasted: it was not held up
      continue;
    }
    ++recovery.affected_jobs;
    if (next == job.event_ms.end()) {
      ++recovery.not_recovered;
      continue;
    }
    recovery.recovery_ms = std::max(recovery.recovery_ms, *next - fault.start_ms);
  }
  return recovery;
}

}  // namespace quark::chaos
