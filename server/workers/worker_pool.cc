#include "server/workers/worker_pool.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/base/log.h"
#include "server/log_text.h"

extern char** environ;

namespace quark::server {
namespace {

namespace fs = std::filesystem;

bool IsExecutable(const std::string& path) {
  std::error_code error;
  return fs::is_regular_file(path, error) && access(path.c_str(), X_OK) == 0;
}

std::string FindOnPath(const std::string& binary) {
  if (binary.find('/') != std::string::npos) return binary;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", binary);
    if (IsExecutable(candidate)) return candidate;
  }
  return binary;
}

// The environment of a child: ours, with `overrides` ("NAME=VALUE") and the GPU selection replacing entries.
std::vector<std::string> ChildEnvironment(std::vector<std::string> overrides, const std::string& gpu,
                                          const std::string& worker_id, const std::string& slot) {
  if (!gpu.empty()) {
    overrides.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
    overrides.push_back("HIP_VISIBLE_DEVICES=" + gpu);
  }
  for (std::string& entry : overrides) entry = absl::StrReplaceAll(entry, {{"{id}", worker_id}, {"{slot}", slot}});
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const std::string& entry : overrides) {
      std::string name = entry.substr(0, entry.find('=') + 1);
      replaced = replaced || absl::StartsWith(*e, name);
    }
    if (!replaced) env.emplace_back(*e);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string DefaultWorkerBinary() {
  std::error_code error;
  fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    fs::path beside = self.parent_path() / "quark-worker";
    if (IsExecutable(beside.string())) return beside.string();
    fs::path build_tree = self.parent_path().parent_path() / "worker" / "quark-worker";
    if (IsExecutable(build_tree.string())) return build_tree.string();
  }
  return "quark-worker";
}

WorkerPool::WorkerPool(WorkerPoolOptions options, RestartHook on_restart)
    : options_(std::move(options)), on_restart_(std::move(on_restart)) {
  for (int i = 0; i < options_.count; ++i) {
    Child child;
    child.slot = absl::StrCat("local-", i);
    child.id = absl::StrCat(options_.id_prefix, child.slot, options_.id_suffix);
    child.backoff = options_.min_backoff;
    children_.push_back(child);
  }
}

WorkerPool::~WorkerPool() { Stop(); }

absl::Status WorkerPool::Start() {
  std::string binary = FindOnPath(options_.binary);
  if (!IsExecutable(binary)) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker-binary: \"", options_.binary, "\" is not an executable file (set --worker-binary)"));
  }
  options_.binary = binary;  // resolved once, before the thread starts
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void WorkerPool::SpawnLocked(Child& child) {
  size_t index = &child - children_.data();
  std::vector<std::string> args = {options_.binary, "--server", options_.server_address, "--worker-id", child.id};
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<std::string> env =
      ChildEnvironment(options_.env, index < options_.gpus.size() ? options_.gpus[index] : "", child.id, child.slot);
  std::vector<char*> argv = CStrings(args);
  std::vector<char*> envp = CStrings(env);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec. Die with the supervising thread of quarkd.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;  // quarkd blocks SIGTERM/SIGINT for its signal thread; the worker must not inherit that
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (getppid() != parent) _exit(1);
    syscall(SYS_close_range, 3u, ~0u, 0u);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) {
    log::Get("server")->error("job=- worker={} fork failed; retrying in {}", child.id, absl::FormatDuration(child.backoff));
    child.next_start = absl::Now() + child.backoff;
    return;
  }
  child.pid = pid;
  child.started = absl::Now();
  log::Get("server")->info("job=- worker={} started pid={} binary={}", child.id, pid, ForLog(options_.binary));
}

void WorkerPool::ReapLocked() {
  absl::Time now = absl::Now();
  for (Child& child : children_) {
    if (child.pid <= 0) continue;
    int status = 0;
    if (waitpid(child.pid, &status, WNOHANG) != child.pid) continue;
    if (now - child.started >= options_.stable_after) child.backoff = options_.min_backoff;
    log::Get("server")->warn("job=- worker={} pid={} exited ({} {}); restart in {}", child.id, child.pid,
                             WIFSIGNALED(status) ? "signal" : "status",
                             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                             absl::FormatDuration(child.backoff));
    child.pid = -1;
    child.next_start = now + child.backoff;
    child.backoff = std::min(child.backoff * 2, options_.max_backoff);
    ++restarts_;
    if (on_restart_) on_restart_(child.id, status);
  }
}

void WorkerPool::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    ReapLocked();
    absl::Time now = absl::Now();
    for (Child& child : children_) {
      if (child.pid <= 0 && now >= child.next_start) SpawnLocked(child);
    }
    // Exits are polled: a 50 ms delay before a restart is far below any backoff.
    wake_.wait_for(lock, std::chrono::milliseconds(50));
  }
  // Stopping happens on this thread: the children's PDEATHSIG is tied to it.
  for (Child& child : children_) {
    if (child.pid > 0) kill(child.pid, SIGTERM);
  }
  absl::Time give_up = absl::Now() + options_.stop_grace;
  for (Child& child : children_) {
    while (child.pid > 0) {
      int status = 0;
      if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
        child.pid = -1;
      } else if (absl::Now() >= give_up) {
        kill(child.pid, SIGKILL);
        waitpid(child.pid, &status, 0);
        child.pid = -1;
      } else {
        wake_.wait_for(lock, std::chrono::milliseconds(20));
      }
    }
  }
}

void WorkerPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool WorkerPool::Kill(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Child& child : children_) {
    if (child.id == worker_id && child.pid > 0) {
      kill(child.pid, SIGKILL);
      wake_.notify_all();
      return true;
    }
  }
  return false;
}

pid_t WorkerPool::PidOf(const std::string& worker_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Child& child : children_) {
    if (child.id == worker_id) return child.pid;
  }
  return -1;
}

int WorkerPool::Restarts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return restarts_;
}

}  // namespace quark::server
