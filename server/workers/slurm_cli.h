// Slurm's command-line tools as quarkd uses them: sbatch to start a worker, squeue for the state (and pending
// reason) of the workers it started, scancel to end them. Every command runs by argv with a time limit; a
// failure comes back as a status carrying the tool's own stderr.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace quark::server {

struct SlurmCommands {
  std::string sbatch = "sbatch";
  std::string squeue = "squeue";
  std::string scancel = "scancel";
  absl::Duration timeout = absl::Seconds(30);  // slurmctld answers within MessageTimeout (10 s by default)
};

/// One line of squeue: the Slurm job id, its state (PENDING, RUNNING, COMPLETING, ...), the reason it waits
/// ("Resources", "Priority", "None", ...) and the nodes it runs on ("" while pending).
struct SlurmJobState {
  std::string id;
  std::string state;
  std::string reason;
  std::string nodes;
};

class SlurmCli {
 public:
  explicit SlurmCli(SlurmCommands commands) : commands_(std::move(commands)) {}

  /// `sbatch --parsable ARGS SCRIPT`; the new Slurm job id. The error carries sbatch's stderr.
  absl::StatusOr<std::string> Submit(const std::vector<std::string>& args, const std::string& script) const;
  /// The jobs named `job_name` that slurmctld still knows (pending, running, completing).
  absl::StatusOr<std::vector<SlurmJobState>> Queue(const std::string& job_name) const;
  /// scancel of these ids (nothing to do for none).
  absl::Status Cancel(const std::vector<std::string>& ids) const;

 private:
  SlurmCommands commands_;
};

/// The lines of `squeue --noheader --format=%i|%T|%r|%N`. INVALID_ARGUMENT naming the line when one has fewer
/// than four fields.
absl::StatusOr<std::vector<SlurmJobState>> ParseSqueue(const std::string& text);

/// The job id in `sbatch --parsable` output ("12" or "12;cluster"). INVALID_ARGUMENT when it is not a number.
absl::StatusOr<std::string> ParseSbatchId(const std::string& text);

}  // namespace quark::server
