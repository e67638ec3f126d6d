// A real one-node Slurm cluster for tests, on loopback: munged with its own key, slurmctld and slurmd (Debian's
// slurm-wlm) in the foreground, every file in a fresh temporary folder, ports picked free. The node is this
// machine with the CPUs and memory `slurmd -C` reports. Teardown scancels every job, stops the daemons (SIGTERM,
// then SIGKILL) and kills any process a job left behind, found by this cluster's SLURM_CONF in its environment.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/workers/command_runner.h"
#include "tests/server/test_util.h"

namespace quark::server::testing {

/// A daemon started in the foreground; stopped (SIGTERM, SIGKILL after 5 s) when destroyed, and killed by the
/// kernel if the test process dies first (a crash skips every destructor).
class DaemonProcess {
 public:
  DaemonProcess(const std::vector<std::string>& argv, const std::string& log_path) {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
  }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  ~DaemonProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  /// False once the process has exited.
  bool Alive() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
};

class TestSlurm {
 public:
  static bool Installed() {
    return std::system("command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 && "
                       "command -v munged >/dev/null 2>&1 && command -v sbatch >/dev/null 2>&1") == 0;
  }

  /// Starts the cluster; "" on success, else what failed (with the daemons' log tails). Sets SLURM_CONF for this
  /// process and what it starts (quarkd's sbatch, squeue and scancel find the cluster through it).
  std::string Start() {
    std::string pattern = "/tmp/quark-slurm-XXXXXX";  // short: munge's socket path
    if (mkdtemp(pattern.data()) == nullptr) return "mkdtemp failed";
    dir_ = pattern;
    for (const char* sub : {"munge", "run", "state", "spool", "log"}) std::filesystem::create_directories(dir_ + "/" + sub);
    std::filesystem::permissions(dir_ + "/munge", std::filesystem::perms::owner_all);
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                           std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                           std::filesystem::perms::others_exec);
    std::string error = StartMunge();
    if (!error.empty()) return error;
    error = WriteConfig();
    if (!error.empty()) return error;
    setenv("SLURM_CONF", conf().c_str(), 1);
    slurmctld_ = std::make_unique<DaemonProcess>(std::vector<std::string>{"slurmctld", "-D", "-i", "-f", conf()},
                                                 dir_ + "/log/slurmctld.out");
    slurmd_ = std::make_unique<DaemonProcess>(std::vector<std::string>{"slurmd", "-D", "-f", conf(), "-N", node_},
                                              dir_ + "/log/slurmd.out");
    bool idle = WaitFor([&] { return Run({"sinfo", "--noheader", "--format=%t"}) == "idle"; },
                        std::chrono::seconds(60));
    if (!idle) return "the node never became idle in sinfo:\n" + Logs();
    return "";
  }

  ~TestSlurm() {
    if (dir_.empty()) return;
    if (slurmctld_) {
      Run({"scancel", "--user=" + user_});
      WaitFor([&] { return Run({"squeue", "--noheader", "--format=%i"}).empty(); }, std::chrono::seconds(15));
    }
    slurmd_.reset();
    slurmctld_.reset();
    KillLeftovers();
    munged_.reset();
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
  }

  const std::string& dir() const { return dir_; }
  std::string conf() const { return dir_ + "/slurm.conf"; }
  int cpus() const { return cpus_; }

  /// A Slurm command's stdout without surrounding blanks ("" when it failed).
  static std::string Run(const std::vector<std::string>& argv) {
    absl::StatusOr<CommandResult> result = RunCommand(argv, absl::Seconds(20));
    if (!result.ok() || result->exit_code != 0) return "";
    std::string out = result->out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    while (!out.empty() && (out.front() == '\n' || out.front() == ' ')) out.erase(out.begin());
    return out;
  }

  /// The tails of the daemons' logs, for failure messages.
  std::string Logs() const {
    std::string text;
    for (const char* name : {"log/munged.log", "log/slurmctld.log", "log/slurmd.log", "log/slurmctld.out",
                             "log/slurmd.out"}) {
      std::ifstream in(dir_ + "/" + name);
      std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (body.size() > 1500) body = body.substr(body.size() - 1500);
      absl::StrAppend(&text, "--- ", name, "\n", body, "\n");
    }
    return text;
  }

 private:
  static int FreePort() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port = ntohs(address.sin_port);
    }
    close(fd);
    return port;
  }

  std::string StartMunge() {
    std::string key = dir_ + "/munge/munge.key";
    if (std::system(("mungekey --create --keyfile=" + key + " >/dev/null 2>&1").c_str()) != 0) {
      return "mungekey --create failed";
    }
    socket_ = dir_ + "/run/munge.socket";
    munged_ = std::make_unique<DaemonProcess>(
        std::vector<std::string>{"munged", "--foreground", "--force", "--socket=" + socket_, "--key-file=" + key,
                                 "--log-file=" + dir_ + "/log/munged.log", "--pid-file=" + dir_ + "/run/munged.pid",
                                 "--seed-file=" + dir_ + "/munge/munged.seed"},
        dir_ + "/log/munged.out");
    if (!WaitFor([&] { return std::filesystem::exists(socket_); }, std::chrono::seconds(10))) {
      return "munged did not create its socket:\n" + Logs();
    }
    return "";
  }

  std::string WriteConfig() {
    // `slurmd -C` prints this machine as a node line: NodeName=HOST CPUs=N ... RealMemory=M.
    std::string node_line = Run({"slurmd", "-C"});
    std::smatch match;
    if (!std::regex_search(node_line, match, std::regex("NodeName=(\\S+) CPUs=(\\d+).*RealMemory=(\\d+)"))) {
      return "slurmd -C printed no node line: " + node_line;
    }
    node_ = match[1];
    cpus_ = std::stoi(match[2]);
    std::string memory = match[3];
    passwd* me = getpwuid(getuid());
    user_ = me != nullptr ? me->pw_name : "root";
    std::ofstream out(conf());
    out << "ClusterName=quarktest\n"
        << "SlurmctldHost=" << node_ << "(127.0.0.1)\n"
        << "SlurmctldPort=" << FreePort() << "\nSlurmdPort=" << FreePort() << "\n"
        << "SlurmUser=" << user_ << "\nSlurmdUser=" << user_ << "\n"
        << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << socket_ << "\n"
        << "StateSaveLocation=" << dir_ << "/state\nSlurmdSpoolDir=" << dir_ << "/spool\n"
        << "SlurmctldPidFile=" << dir_ << "/run/slurmctld.pid\nSlurmdPidFile=" << dir_ << "/run/slurmd.pid\n"
        << "SlurmctldLogFile=" << dir_ << "/log/slurmctld.log\nSlurmdLogFile=" << dir_ << "/log/slurmd.log\n"
        << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n"
        << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nSchedulerType=sched/backfill\n"
        << "SchedulerParameters=sched_interval=1\n"
        << "AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none\n"
        << "JobCompType=jobcomp/none\nReturnToService=2\nMinJobAge=10\nKillWait=3\nInactiveLimit=0\n"
        << "NodeName=" << node_ << " NodeAddr=127.0.0.1 CPUs=" << cpus_ << " RealMemory=" << memory
        << " State=UNKNOWN\n"
        << "PartitionName=debug Nodes=" << node_ << " Default=YES MaxTime=INFINITE State=UP\n";
    if (!out) return "cannot write " + conf();
    return WriteCgroupConfig();
  }

  // The configuration above tracks processes without cgroups, but slurmd 24.x still starts its cgroup plugin and
  // refuses to run where no cgroup filesystem is mounted (a chroot, a bare container) unless cgroup.conf says
  // CgroupPlugin=disabled. 22.05 (bookworm's) has no such value, and needs none: it is written from 24.05 on, the
  // first release whose cgroup.conf(5) documents it.
  std::string WriteCgroupConfig() const {
    std::smatch version;
    const std::string banner = Run({"slurmd", "-V"});  // "slurm 24.11.5" or "slurm-wlm 22.05.8"
    if (!std::regex_search(banner, version, std::regex("(\\d+)\\.(\\d+)"))) {
      return "slurmd -V printed no version: " + banner;
    }
    const int major = std::stoi(version[1]);
    const int minor = std::stoi(version[2]);
    if (major < 24 || (major == 24 && minor < 5)) return "";
    std::ofstream out(dir_ + "/cgroup.conf");
    out << "CgroupPlugin=disabled\n";
    return out ? "" : "cannot write " + dir_ + "/cgroup.conf";
  }

  // Processes a job left running after slurmd stopped (slurmstepd and its children carry SLURM_CONF).
  void KillLeftovers() const {
    std::string marker = "SLURM_CONF=" + conf();
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
      std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      pid_t pid = std::stoi(name);
      if (pid == getpid()) continue;
      std::ifstream in(entry.path() / "environ");
      std::string environ((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (environ.find(marker) != std::string::npos) {
        kill(pid, SIGKILL);
      }
    }
  }

  std::string dir_;
  std::string socket_;
  std::string node_;
  std::string user_;
  int cpus_ = 1;
  std::unique_ptr<DaemonProcess> munged_;
  std::unique_ptr<DaemonProcess> slurmctld_;
  std::unique_ptr<DaemonProcess> slurmd_;
};

}  // namespace quark::server::testing
