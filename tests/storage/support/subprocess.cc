#include "tests/storage/support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace quark::testing {
namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const std::vector<std::string>& argv,
                                                              const std::vector<std::string>& env,
                                                              const fs::path& log) {
  if (argv.empty()) return absl::InvalidArgumentError("argv is empty");
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const std::string& extra : env) env_strings.push_back(extra);
  std::vector<char*> argv_ptrs;
  for (const std::string& a : argv) argv_ptrs.push_back(const_cast<char*>(a.c_str()));
  argv_ptrs.push_back(nullptr);
  std::vector<char*> env_ptrs;
  // Later entries win in most libcs only by luck; keep the last value of each name explicitly.
  std::vector<std::string> unique;
  for (auto it = env_strings.rbegin(); it != env_strings.rend(); ++it) {
    std::string name = it->substr(0, it->find('='));
    bool seen = false;
    for (const std::string& u : unique) seen = seen || u.substr(0, u.find('=')) == name;
    if (!seen) unique.push_back(*it);
  }
  for (const std::string& e : unique) env_ptrs.push_back(const_cast<char*>(e.c_str()));
  env_ptrs.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    setpgid(0, 0);
    execvpe(argv_ptrs[0], argv_ptrs.data(), env_ptrs.data());
    _exit(127);
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid, log));
}

Subprocess::~Subprocess() {
  if (!exited_) Stop(SIGTERM);
}

bool Subprocess::Reap(int options, int* code) {
  if (exited_) {
    *code = exit_code_;
    return true;
  }
  int status = 0;
  pid_t r = waitpid(pid_, &status, options);
  if (r != pid_) return false;
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  *code = exit_code_;
  return true;
}

int Subprocess::Stop(int signal) {
  int code = 0;
  if (Reap(WNOHANG, &code)) return code;
  kill(pid_, signal);
  for (int i = 0; i < 500; ++i) {  // up to 5 s for a clean exit
    if (Reap(WNOHANG, &code)) return code;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  Reap(0, &code);
  return code;
}

absl::StatusOr<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int code = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Reap(WNOHANG, &code)) return code;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " still running; log:\n", Log()));
}

std::string Subprocess::Log() const { return ReadFile(log_); }

absl::StatusOr<std::string> Subprocess::WaitForLine(const std::regex& pattern, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::istringstream lines(Log());
    std::string line;
    std::smatch match;
    while (std::getline(lines, line)) {
      if (std::regex_search(line, match, pattern)) return match.size() > 1 ? match[1].str() : line;
    }
    int code = 0;
    if (Reap(WNOHANG, &code)) {
      return absl::UnavailableError(absl::StrCat("process exited with ", code, " before printing the line; log:\n",
                                                 Log()));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("no matching line; log:\n", Log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = fs::temp_directory_path() / absl::StrCat("quark-test-", getpid(), "-", rd());
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

fs::path NodeModulesDir() {
  fs::path dir = fs::path(EnvOr("QUARK_SOURCE_DIR", QUARK_TEST_SOURCE_DIR)) / "tests/peers/node_modules";
  return fs::is_directory(dir) ? dir : fs::path();
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace quark::testing
