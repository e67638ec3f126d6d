#include "server/workers/slurm_executor.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/scheduler.h"
#include "server/scheduler/sweep_table.h"
#include "server/scheduler/time_util.h"
#include "server/store/job_store.h"
#include "server/workers/command_runner.h"

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::JobState;
using quark::v1::WorkerResources;

constexpr absl::Duration kMaxBackoff = absl::Seconds(60);
// sbatch returns once slurmctld holds the job, so squeue lists it at once; this only covers a slow slurmctld.
constexpr absl::Duration kUnlistedGrace = absl::Seconds(10);
// A running worker without a job leaves by itself after --exit-when-idle, whether or not a job waits (one it
// could take it would have leased). Still there this much later, it is not reaching quarkd: scancelled.
absl::Duration SelfExitLimit(absl::Duration idle_exit) { return idle_exit + std::max(idle_exit, absl::Seconds(10)); }

// POSIX shell single quotes: nothing inside is special but the quote itself.
std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool Fits(const WorkerResources& worker, const WorkerResources& job, int default_cpus) {
  int cpus = job.cpus() > 0 ? job.cpus() : default_cpus;
  return worker.gpus() >= job.gpus() && worker.memory_mb() >= job.memory_mb() && worker.cpus() >= cpus;
}

// What a job's Slurm worker is asked for: spec.resources, its memory raised to the job's recorded need
// (Job.needs_host_memory_bytes, rounded up to MiB). A worker given less would announce less, never be handed the
// job (worker_fit.h), idle out and be started again, forever.
WorkerResources WantedResources(const Job& job) {
  WorkerResources wanted = job.spec().resources();
  const int64_t need_mb = (job.needs_host_memory_bytes() + (int64_t{1} << 20) - 1) >> 20;
  if (need_mb > wanted.memory_mb()) wanted.set_memory_mb(need_mb);
  return wanted;
}

// States in which a worker will still lease a job: not yet started, starting, or up.
bool MayTakeJobs(const std::string& state) {
  return state == "SUBMITTED" || state == "PENDING" || state == "CONFIGURING" || state == "RUNNING";
}

}  // namespace

SlurmExecutor::SlurmExecutor(SlurmExecutorOptions options, JobStore* store, Scheduler* scheduler)
    : options_(std::move(options)), store_(store), scheduler_(scheduler), cli_(options_.commands) {}

absl::StatusOr<std::unique_ptr<SlurmExecutor>> SlurmExecutor::Start(SlurmExecutorOptions options, JobStore* store,
                                                                    Scheduler* scheduler) {
  if (options.worker_command.empty()) return absl::InvalidArgumentError("slurm-worker-command: required");
  if (options.server_address.empty()) return absl::InvalidArgumentError("slurm-server-address: required");
  if (options.work_dir.empty()) return absl::InvalidArgumentError("slurm work dir: required");
  if (options.max_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("slurm-max-workers: ", options.max_workers, " is below 1"));
  }
  if (options.idle_exit <= absl::ZeroDuration()) return absl::InvalidArgumentError("slurm-idle-exit-s: must be > 0");
  if (options.poll_interval <= absl::ZeroDuration()) return absl::InvalidArgumentError("slurm poll interval: must be > 0");
  std::unique_ptr<SlurmExecutor> executor(new SlurmExecutor(std::move(options), store, scheduler));
  absl::Status status = executor->WriteScript();
  if (!status.ok()) return status;
  SlurmExecutor* self = executor.get();
  executor->thread_ = std::thread([self] { self->Loop(); });
  log::Get("slurm")->info("job=- slurm executor: workers run {} against {}, at most {}, idle exit {}",
                          ForLog(self->options_.worker_command), self->options_.server_address,
                          self->options_.max_workers, absl::FormatDuration(self->options_.idle_exit));
  return executor;
}

SlurmExecutor::~SlurmExecutor() { Stop(); }

absl::Status SlurmExecutor::WriteScript() {
  std::error_code error;
  std::filesystem::path dir = std::filesystem::absolute(options_.work_dir, error);
  std::filesystem::create_directories(dir / "logs", error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("slurm work dir: cannot create \"", (dir / "logs").string(), "\": ", error.message()));
  }
  script_ = (dir / "quark-worker.sbatch").string();
  std::string tmp = script_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "#!/bin/sh\n"
        << "# Written by quarkd --executor slurm: one quark-worker per Slurm job, leaving once idle.\n"
        << "set -e\n";
    if (!options_.token_file.empty()) {
      // Read on the node at start, so the token is neither in sbatch's arguments nor in the script.
      out << "QUARK_WORKER_TOKEN=\"$(cat " << ShellQuote(options_.token_file) << ")\"\n"
          << "export QUARK_WORKER_TOKEN\n";
    }
    // The GPUs Slurm gave the job (--gres=gpu:N sets CUDA_VISIBLE_DEVICES) are the devices the worker announces, so
    // that quarkd leases it the GPU job it was started for (worker_fit.h); an explicit --devices in the worker
    // arguments wins.
    out << "if [ -z \"${QUARK_WORKER_DEVICES:-}\" ] && [ -n \"${CUDA_VISIBLE_DEVICES:-}\" ]; then\n"
        << "  QUARK_WORKER_DEVICES=\"$(echo \"$CUDA_VISIBLE_DEVICES\" | "
        << "awk -F, '{for (i = 1; i <= NF; i++) printf \"%scuda:%d\", (i > 1 ? \",\" : \"\"), i - 1}')\"\n"
        << "  export QUARK_WORKER_DEVICES\n"
        << "fi\n";
    out << "exec " << ShellQuote(options_.worker_command) << " --server " << ShellQuote(options_.server_address)
        << " --worker-id \"slurm-${SLURM_JOB_ID}\" --exit-when-idle "
        << absl::StrCat(absl::ToDoubleSeconds(options_.idle_exit));
    for (const std::string& arg : options_.worker_args) out << " " << ShellQuote(arg);
    out << "\n";
    if (!out) return absl::FailedPreconditionError(absl::StrCat("slurm work dir: cannot write \"", tmp, "\""));
  }
  chmod(tmp.c_str(), 0700);
  std::filesystem::rename(tmp, script_, error);
  if (error) {
    return absl::FailedPreconditionError(absl::StrCat("slurm work dir: cannot write \"", script_, "\": ",
                                                      error.message()));
  }
  return absl::OkStatus();
}

void SlurmExecutor::Loop() {
  do {
    Poll(absl::Now());
  } while (!stop_.WaitForNotificationWithTimeout(options_.poll_interval));
}

void SlurmExecutor::Poll(absl::Time now) {
  absl::StatusOr<std::vector<StoredJob>> queued = store_->LoadJobs({JobState::JOB_STATE_QUEUED});
  absl::StatusOr<std::vector<StoredJob>> running = store_->LoadJobs({JobState::JOB_STATE_RUNNING});
  if (!queued.ok() || !running.ok()) {
    log::Get("slurm")->warn("job=- slurm executor: cannot read the queue: {}",
                            ForLog((queued.ok() ? running.status() : queued.status()).ToString()));
    return;
  }
  // A deduplicated job that follows another one is never leased: it needs no worker.
  queued->erase(std::remove_if(queued->begin(), queued->end(),
                               [](const StoredJob& stored) { return !stored.job.deduplicated_from().empty(); }),
                queued->end());
  std::map<std::string, Job> queued_by_id;
  for (const StoredJob& stored : *queued) queued_by_id[stored.job.id()] = stored.job;
  std::set<std::string> busy;                     // worker ids holding a job
  std::map<std::string, std::string> running_on;  // job id -> worker id
  for (const StoredJob& stored : *running) {
    if (IsSweepParent(stored.job)) continue;  // #36: a sweep's parent runs on no worker
    busy.insert(stored.job.worker_id());
    running_on[stored.job.id()] = stored.job.worker_id();
  }
  // Nothing is decided without the workers' states: a failed squeue would make every worker look gone.
  if (!workers_.empty() && !UpdateStates(now, queued_by_id, running_on)) return;

  // The scheduler's order: higher priority first, then submission order (LoadJobs returns creation order).
  std::stable_sort(queued->begin(), queued->end(), [](const StoredJob& a, const StoredJob& b) {
    return a.job.spec().priority() > b.job.spec().priority();
  });
  std::set<std::string> matched;
  auto available = [&](const Worker& worker) {
    return !worker.cancelled && MayTakeJobs(worker.state) && !busy.count(WorkerId(worker.slurm_id)) &&
           !matched.count(worker.slurm_id);
  };
  for (const StoredJob& stored : *queued) {
    const Job& job = stored.job;
    const Worker* pick = nullptr;
    for (const auto& [id, worker] : workers_) {
      if (!available(worker) || !Fits(worker.resources, WantedResources(job), options_.default_cpus)) continue;
      if (pick == nullptr || worker.for_job == job.id()) pick = &worker;
      if (worker.for_job == job.id()) break;
    }
    if (pick != nullptr) {
      matched.insert(pick->slurm_id);
      continue;
    }
    if (static_cast<int>(workers_.size()) >= options_.max_workers) continue;
    auto retry = retries_.find(job.id());
    if (retry != retries_.end() && now < retry->second.next_try) continue;
    std::string id = Submit(now, job);
    if (!id.empty()) matched.insert(id);
  }
  for (auto it = retries_.begin(); it != retries_.end();) {
    it = queued_by_id.count(it->first) ? std::next(it) : retries_.erase(it);
  }

  std::vector<std::string> to_cancel;
  std::map<std::string, std::string> why;  // Slurm id -> the reason, for the log and the job's events
  for (auto& [id, worker] : workers_) {
    if (worker.cancelled) continue;
    if (busy.count(WorkerId(id))) {
      worker.unneeded_since = absl::InfiniteFuture();
      continue;
    }
    if (worker.state == "RUNNING") {
      // Matched or not: a running worker is judged by how long it has gone without a job.
      if (worker.unneeded_since == absl::InfiniteFuture()) worker.unneeded_since = now;
      if (now - worker.unneeded_since >= SelfExitLimit(options_.idle_exit)) {
        to_cancel.push_back(id);
        why[id] = absl::StrCat("running ", absl::FormatDuration(now - worker.unneeded_since),
                               " without a job, past its --exit-when-idle (does it reach quarkd at ",
                               options_.server_address, "? see its Slurm log)");
      }
      continue;
    }
    if (matched.count(id)) {
      worker.unneeded_since = absl::InfiniteFuture();
      continue;
    }
    if (worker.unneeded_since == absl::InfiniteFuture()) worker.unneeded_since = now;
    if (now - worker.unneeded_since >= options_.idle_exit) {
      to_cancel.push_back(id);
      why[id] = absl::StrCat(worker.state, ", no queued job needed it for ",
                             absl::FormatDuration(now - worker.unneeded_since));
    }
  }
  if (to_cancel.empty()) return;
  absl::Status status = cli_.Cancel(to_cancel);
  if (!status.ok()) {
    log::Get("slurm")->warn("job=- scancel of unneeded workers failed: {}", ForLog(status.ToString()));
    return;
  }
  for (const std::string& id : to_cancel) {
    Worker& worker = workers_[id];
    worker.cancelled = true;
    std::string text = absl::StrCat("slurm: worker job ", id, " scancelled: ", why[id]);
    if (queued_by_id.count(worker.for_job)) {
      Note(worker.for_job, text);
    } else {
      log::Get("slurm")->info("job=- {}", ForLog(text));
    }
  }
}

bool SlurmExecutor::UpdateStates(absl::Time now, const std::map<std::string, Job>& queued,
                                 const std::map<std::string, std::string>& running) {
  absl::StatusOr<std::vector<SlurmJobState>> listed = cli_.Queue(options_.job_name);
  if (!listed.ok()) {
    log::Get("slurm")->warn("job=- squeue failed, workers' states unknown this round: {}",
                            ForLog(listed.status().ToString()));
    return false;
  }
  std::map<std::string, SlurmJobState> by_id;
  for (SlurmJobState& state : *listed) by_id[state.id] = std::move(state);
  for (auto it = workers_.begin(); it != workers_.end();) {
    Worker& worker = it->second;
    auto seen = by_id.find(worker.slurm_id);
    if (seen == by_id.end()) {
      if (worker.state == "SUBMITTED" && now - worker.submitted < kUnlistedGrace) {
        ++it;
        continue;
      }
      log::Get("slurm")->info("job=- slurm worker job {} ended (last seen {})", worker.slurm_id, worker.state);
      it = workers_.erase(it);
      continue;
    }
    if (seen->second.state != worker.state || seen->second.reason != worker.reason) {
      if (seen->second.state != worker.state) worker.unneeded_since = absl::InfiniteFuture();  // judged anew
      worker.state = seen->second.state;
      worker.reason = seen->second.reason;
      std::string text = absl::StrCat("slurm: worker job ", worker.slurm_id, " ", worker.state);
      if (worker.state == "RUNNING" && !seen->second.nodes.empty()) {
        absl::StrAppend(&text, " on ", seen->second.nodes);
      } else if (!worker.reason.empty() && worker.reason != "None") {
        absl::StrAppend(&text, " (", worker.reason, ")");
      }
      // The job's own events get it while it waits, and once it runs on this very worker.
      auto job_running = running.find(worker.for_job);
      if (queued.count(worker.for_job) ||
          (job_running != running.end() && job_running->second == WorkerId(worker.slurm_id))) {
        Note(worker.for_job, text);
      } else {
        log::Get("slurm")->info("job=- {}", ForLog(text));
      }
    }
    ++it;
  }
  return true;
}

std::vector<std::string> SlurmExecutor::SbatchArgs(absl::Time now, const Job& job, WorkerResources* given) const {
  const WorkerResources wanted = WantedResources(job);
  *given = wanted;
  if (given->cpus() <= 0) given->set_cpus(options_.default_cpus);
  std::vector<std::string> args = {"--job-name=" + options_.job_name,
                                   "--output=" + (std::filesystem::path(script_).parent_path() / "logs" /
                                                  (options_.job_name + "-%j.log")).string(),
                                   "--ntasks=1", absl::StrCat("--cpus-per-task=", given->cpus())};
  if (!options_.partition.empty()) args.push_back("--partition=" + options_.partition);
  if (wanted.gpus() > 0) args.push_back(absl::StrCat("--gres=gpu:", wanted.gpus()));
  if (wanted.memory_mb() > 0) args.push_back(absl::StrCat("--mem=", wanted.memory_mb(), "M"));
  // The job's deadline bounds the worker's life (plus its idle exit); without one, the configured default.
  if (job.spec().deadline_seconds() > 0 && job.has_created_at()) {
    absl::Duration left = FromTimestamp(job.created_at()) + absl::Seconds(job.spec().deadline_seconds()) - now;
    int64_t minutes = (absl::ToInt64Seconds(std::max(left, absl::ZeroDuration()) + options_.idle_exit) + 59) / 60;
    args.push_back(absl::StrCat("--time=", std::max<int64_t>(1, minutes)));
  } else if (!options_.time_limit.empty()) {
    args.push_back("--time=" + options_.time_limit);
  }
  args.insert(args.end(), options_.sbatch_args.begin(), options_.sbatch_args.end());
  return args;
}

std::string SlurmExecutor::Submit(absl::Time now, const Job& job) {
  WorkerResources given;
  std::vector<std::string> args = SbatchArgs(now, job, &given);
  absl::StatusOr<std::string> id = cli_.Submit(args, script_);
  if (!id.ok()) {
    auto [it, first] = retries_.try_emplace(job.id());
    Retry& retry = it->second;
    retry.backoff = first ? options_.poll_interval : std::min(retry.backoff * 2, kMaxBackoff);
    retry.next_try = now + retry.backoff;
    std::string text = absl::StrCat("slurm: sbatch failed: ", id.status().message());
    log::Get("slurm")->warn("job={} {}; next try in {}", job.id(), ForLog(text), absl::FormatDuration(retry.backoff));
    if (retry.last_error != text) {
      retry.last_error = text;
      Note(job.id(), text + " (retried with backoff)");
    }
    return "";
  }
  retries_.erase(job.id());
  Worker& worker = workers_[*id];
  worker.slurm_id = *id;
  worker.for_job = job.id();
  worker.resources = given;
  worker.submitted = now;
  std::vector<std::string> line = {"sbatch"};
  line.insert(line.end(), args.begin(), args.end());
  Note(job.id(), absl::StrCat("slurm: submitted worker job ", *id, ": ", CommandLine(line)));
  return *id;
}

void SlurmExecutor::Note(const std::string& job_id, const std::string& text) {
  log::Get("slurm")->info("job={} {}", job_id, ForLog(text));
  absl::Status status = scheduler_->AppendLog(job_id, text);
  if (!status.ok()) {
    // The job left the queue meanwhile (started, cancelled): the log line above is all there is.
    log::Get("slurm")->debug("job={} event not added: {}", job_id, ForLog(status.ToString()));
  }
}

void SlurmExecutor::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  std::vector<std::string> ids;
  for (const auto& [id, worker] : workers_) ids.push_back(id);
  if (ids.empty()) return;
  absl::Status status = cli_.Cancel(ids);
  if (status.ok()) {
    log::Get("slurm")->info("job=- slurm executor stopped: scancelled {} workers", ids.size());
  } else {
    log::Get("slurm")->error("job=- slurm executor stopped; scancel of its {} workers failed: {}", ids.size(),
                             ForLog(status.ToString()));
  }
}

}  // namespace quark::server
