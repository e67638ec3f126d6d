// Recovery times of the chaos run: for each injected fault, how long until the jobs it hit made progress again.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace quark::chaos {

/// One fault the driver injected: its kind (kill-worker, kill-replica, restart-postgres, s3-500, s3-reset,
/// s3-slow, disk-full), when it began and ended (ms since the epoch; equal for a kill), and its target (a worker
/// id for kill-worker and disk-full; "" for faults that reach every job).
struct Fault {
  std::string kind;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::string target;
};

/// One attempt of a job: the worker it ran on, when it started and ended (0 = still open).
struct AttemptSpan {
  std::string worker_id;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
};

/// What the checker knows of one job for recovery times: its attempts and the times of all its events.
struct JobTimeline {
  std::vector<AttemptSpan> attempts;
  std::vector<int64_t> event_ms;  // sorted
};

/// The recovery of one fault: the jobs it hit (an attempt running at some time in [start_ms, end_ms] on the
/// target, or anywhere for an untargeted fault) and, over them, the longest wait from start_ms to the job's first event
/// after end_ms. A hit job whose events all end inside the fault's window finished during it (not held up: counted
/// apart); one with no event after start_ms never moved again (not recovered).
struct Recovery {
  int affected_jobs = 0;
  int ended_during = 0;
  int not_recovered = 0;
  int64_t recovery_ms = 0;  // 0 when no job was hit
};

/// Parses the driver's fault log: one "KIND START_MS END_MS [TARGET]" per line. Lines that do not parse are
/// returned in `bad` (the checker reports them as violations).
std::vector<Fault> ParseFaults(const std::string& text, std::vector<std::string>* bad);

Recovery RecoveryOf(const Fault& fault, const std::map<std::string, JobTimeline>& jobs);

}  // namespace quark::chaos
