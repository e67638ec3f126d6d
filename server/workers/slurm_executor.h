// quarkd --executor slurm: keeps Slurm batch workers in step with the queue. Every poll it matches the queued
// jobs with the workers it started that can still take one (pending in Slurm, or running without a job); a job
// left over gets a new worker through sbatch, sized by its WorkerResources (--gres=gpu:N, --mem,
// --cpus-per-task) and its deadline (--time). Slurm's state and pending reason for a job's worker are appended
// to that job's events when they change. A pending worker no queued job needs is scancelled after the idle
// time; a running one leaves by itself (quark-worker --exit-when-idle) and is scancelled only if it does not.
// Stop() scancels every worker it started.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "quark/v1/service.pb.h"
#include "server/workers/slurm_cli.h"

namespace quark::server {

class JobStore;
class Scheduler;

struct SlurmExecutorOptions {
  std::string server_address;             // what the workers dial (quarkd's gRPC address when empty)
  std::string worker_command;             // quark-worker as the Slurm nodes see it
  std::vector<std::string> worker_args;   // appended to every worker's command line (--tls-ca, --data-dir, ...)
  std::string token_file;                 // read by the batch script on the node into QUARK_WORKER_TOKEN
  std::string partition;                  // --partition; "" = the cluster's default
  std::vector<std::string> sbatch_args;   // extra sbatch arguments (--account, --qos, ...)
  int max_workers = 4;                    // workers alive at once (pending or running)
  absl::Duration idle_exit = absl::Seconds(60);  // quark-worker --exit-when-idle; pending workers unneeded this long are scancelled
  int default_cpus = 1;                   // --cpus-per-task when the job's resources name none
  std::string time_limit;                 // --time for jobs without a deadline; "" = the partition's default
  std::string work_dir;                   // the batch script and the workers' Slurm logs (required)
  std::string job_name = "quark-worker";  // Slurm job name of every worker; squeue filters on it
  absl::Duration poll_interval = absl::Seconds(2);
  SlurmCommands commands;
};

/// Thread-safe; one polling thread between Start and Stop (or destruction).
class SlurmExecutor {
 public:
  /// Writes the batch script, checks the options (errors name the flag) and starts polling.
  static absl::StatusOr<std::unique_ptr<SlurmExecutor>> Start(SlurmExecutorOptions options, JobStore* store,
                                                              Scheduler* scheduler);
  ~SlurmExecutor();
  SlurmExecutor(const SlurmExecutor&) = delete;
  SlurmExecutor& operator=(const SlurmExecutor&) = delete;

  /// Ends the polling thread, then scancels every worker still alive. Idempotent.
  void Stop();

  /// The worker id a Slurm job's quark-worker registers with.
  static std::string WorkerId(const std::string& slurm_id) { return "slurm-" + slurm_id; }

 private:
  struct Worker {
    std::string slurm_id;
    std::string for_job;                  // the queued job it was submitted for (its events get Slurm's news)
    quark::v1::WorkerResources resources; // what it was given (cpus filled in)
    absl::Time submitted;
    std::string state = "SUBMITTED";      // squeue's %T once seen there
    std::string reason;
    absl::Time unneeded_since = absl::InfiniteFuture();
    bool cancelled = false;               // scancelled by us; kept until squeue no longer lists it
  };

  SlurmExecutor(SlurmExecutorOptions options, JobStore* store, Scheduler* scheduler);
  absl::Status WriteScript();
  void Loop();
  void Poll(absl::Time now);
  /// squeue: refreshes the workers' states, notes changes on their jobs (`queued` ones, `running` job id ->
  /// worker id), forgets ended workers. False when squeue failed (the states are then unknown this round).
  bool UpdateStates(absl::Time now, const std::map<std::string, quark::v1::Job>& queued,
                    const std::map<std::string, std::string>& running);
  /// sbatch for `job`; the new Slurm job id, "" when sbatch failed (noted on the job, backing off).
  std::string Submit(absl::Time now, const quark::v1::Job& job);
  std::vector<std::string> SbatchArgs(absl::Time now, const quark::v1::Job& job,
                                      quark::v1::WorkerResources* given) const;
  void Note(const std::string& job_id, const std::string& text);

  const SlurmExecutorOptions options_;
  JobStore* const store_;
  Scheduler* const scheduler_;
  const SlurmCli cli_;
  std::string script_;

  // The polling thread's own state (nothing else touches it while the thread runs).
  std::map<std::string, Worker> workers_;          // by Slurm job id
  // A job whose sbatch failed waits before its next try, doubling up to a minute. Per job: a refusal of one job's
  // request (a GPU the cluster lacks) must not hold back the jobs behind it.
  struct Retry {
    std::string last_error;  // noted on the job once until it changes
    absl::Time next_try;
    absl::Duration backoff;
  };
  std::map<std::string, Retry> retries_;  // by job id, while it stays queued

  absl::Notification stop_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace quark::server
