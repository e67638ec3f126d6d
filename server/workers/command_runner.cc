#include "server/workers/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace quark::server {
namespace {

// Closes its descriptor once, whichever way the function returns.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void Reset(int fd) {
    Close();
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// posix_spawn's attribute and file-action objects, destroyed on every path.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

absl::Status Pipe(Fd* read_end, Fd* write_end) {
  int fds[2];
  // O_CLOEXEC: a worker process spawned meanwhile by another thread must not inherit them (it would hold the
  // pipe open and this call would wait for it).
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  read_end->Reset(fds[0]);
  write_end->Reset(fds[1]);
  return absl::OkStatus();
}

}  // namespace

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line += ' ';
    line += arg.find_first_of(" \t'\"") == std::string::npos ? arg : absl::StrCat("'", arg, "'");
  }
  return line;
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, absl::Duration timeout,
                                         size_t max_bytes) {
  if (argv.empty() || argv[0].empty()) return absl::InvalidArgumentError("command: empty argv");
  Fd out_read, out_write, err_read, err_write;
  absl::Status status = Pipe(&out_read, &out_write);
  if (status.ok()) status = Pipe(&err_read, &err_write);
  if (!status.ok()) return status;

  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&setup.actions, err_write.get(), 2);
  sigset_t empty;
  sigemptyset(&empty);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&setup.attr, &empty);
  posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int spawn_error = posix_spawnp(&pid, argv[0].c_str(), &setup.actions, &setup.attr, args.data(), environ);
  out_write.Close();
  err_write.Close();
  if (spawn_error != 0) {
    return absl::NotFoundError(absl::StrCat(argv[0], ": cannot run: ", std::strerror(spawn_error)));
  }

  CommandResult result;
  absl::Time give_up = absl::Now() + timeout;
  bool timed_out = false;
  pollfd fds[2] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_streams = 2;
  while (open_streams > 0) {
    int64_t left_ms = absl::ToInt64Milliseconds(give_up - absl::Now());
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    int ready = poll(fds, 2, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && ready > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        size_t room = max_bytes > sinks[i]->size() ? max_bytes - sinks[i]->size() : 0;
        sinks[i]->append(buffer, std::min<size_t>(room, static_cast<size_t>(n)));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        fds[i].fd = -1;  // poll ignores negative descriptors
        --open_streams;
      }
    }
  }
  if (timed_out) kill(pid, SIGKILL);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(argv[0], ": no answer within ", absl::FormatDuration(timeout),
                                                    " (killed)"));
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::InternalError(absl::StrCat(argv[0], ": ended by signal ", WTERMSIG(wait_status)));
  }
  result.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  return result;
}

}  // namespace quark::server
