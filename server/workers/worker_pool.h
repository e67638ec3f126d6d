// Supervises local quark-worker processes: spawns `BINARY --server ADDR --worker-id local-N [extra args]`,
// restarts one that exits (exponential backoff), kills on request, stops them all on shutdown.
// Children get PR_SET_PDEATHSIG(SIGKILL) so a kill -9 of quarkd does not leave orphans running jobs.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace quark::server {

struct WorkerPoolOptions {
  std::string binary;                   // path of quark-worker
  std::string server_address;           // what workers dial ("127.0.0.1:PORT")
  int count = 1;                        // number of workers (slots local-0 .. local-(count-1))
  std::string id_prefix;                // before "local-N" (replicas sharing a store: ids unique across them)
  /// After "local-N" (#29: "-" and 16 random hex digits per quarkd start, so a worker id cannot be known before
  /// quarkd runs); "" = ids are the slot names.
  std::string id_suffix;
  std::vector<std::string> gpus;        // when not empty, worker i gets CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES=gpus[i]
  std::vector<std::string> extra_args;  // appended to every worker's command line
  /// "NAME=VALUE" set in every worker's environment (replacing ours). "{id}" in a value becomes the worker id,
  /// "{slot}" its slot ("local-N", the same across quarkd starts: its data folder, checkpoints and caches).
  std::vector<std::string> env;
  absl::Duration min_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(10);
  absl::Duration stable_after = absl::Seconds(30);  // a worker up this long resets its backoff
  absl::Duration stop_grace = absl::Seconds(3);     // SIGTERM, then SIGKILL after this
};

class WorkerPool {
 public:
  /// Called after each restart of a worker that had exited (for metrics).
  using RestartHook = std::function<void(const std::string& worker_id, int exit_status)>;

  explicit WorkerPool(WorkerPoolOptions options, RestartHook on_restart = nullptr);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /// FAILED_PRECONDITION when the binary is not an executable file. Starts the supervising thread.
  absl::Status Start();
  /// SIGTERM to all, SIGKILL after the grace period, reaps them. Idempotent.
  void Stop();
  /// SIGKILL to local worker `worker_id` (it is restarted). False when it is not one of ours or not running.
  bool Kill(const std::string& worker_id);
  /// The pid of a running worker, or -1.
  pid_t PidOf(const std::string& worker_id) const;
  /// Worker restarts so far.
  int Restarts() const;

 private:
  struct Child {
    std::string id;
    std::string slot;  // "local-N"
    pid_t pid = -1;
    absl::Time started;
    absl::Time next_start;
    absl::Duration backoff;
  };
  void Run();
  void SpawnLocked(Child& child);
  void ReapLocked();

  WorkerPoolOptions options_;  // binary resolved on PATH by Start()
  const RestartHook on_restart_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Child> children_;
  bool stopping_ = false;
  int restarts_ = 0;
  std::thread thread_;
};

/// The default quark-worker binary: next to the running executable, else ../worker/quark-worker beside its
/// folder (the build tree's layout), else "quark-worker" (found on PATH).
std::string DefaultWorkerBinary();

}  // namespace quark::server
