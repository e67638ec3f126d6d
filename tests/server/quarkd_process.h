// Runs the real quarkd executable for process-level tests: start, wait until serving, kill -9, stop.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/server/test_util.h"

namespace quark::server::testing {

class QuarkdProcess {
 public:
  /// Starts `binary` with `args` plus --ready-file; logs go to `log_path`. Waits until it serves.
  bool Start(const std::string& binary, std::vector<std::string> args, const std::string& ready_file,
             const std::string& log_path) {
    std::remove(ready_file.c_str());
    args.insert(args.begin(), binary);
    args.push_back("--ready-file");
    args.push_back(ready_file);
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (pid_ < 0) return false;
    bool ready = WaitFor([&] {
      std::ifstream in(ready_file);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::smatch match;
      if (!std::regex_search(text, match, std::regex("\"grpc\": \"([^\"]+)\""))) return false;
      address_ = match[1];
      return true;
    });
    return ready;
  }

  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }

  void Kill9() { Signal(SIGKILL); }
  void Stop() { Signal(SIGTERM); }
  ~QuarkdProcess() { Signal(SIGKILL); }

 private:
  void Signal(int signal_number) {
    if (pid_ <= 0) return;
    kill(pid_, signal_number);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  pid_t pid_ = -1;
  std::string address_;
};

}  // namespace quark::server::testing
