#include "server/workers/slurm_cli.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/log_text.h"
#include "server/workers/command_runner.h"

namespace quark::server {
namespace {

// The command's stdout, or an error naming the command with its exit status and stderr.
absl::StatusOr<std::string> Run(const std::vector<std::string>& argv, absl::Duration timeout) {
  absl::StatusOr<CommandResult> result = RunCommand(argv, timeout);
  if (!result.ok()) return result.status();
  if (result->exit_code != 0) {
    std::string err(absl::StripAsciiWhitespace(result->err.empty() ? result->out : result->err));
    return absl::UnavailableError(
        absl::StrCat(argv[0], " exited with status ", result->exit_code, ": ", ForLog(err, 1024)));
  }
  return std::move(result->out);
}

}  // namespace

absl::StatusOr<std::vector<SlurmJobState>> ParseSqueue(const std::string& text) {
  std::vector<SlurmJobState> jobs;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<std::string> fields = absl::StrSplit(line, absl::MaxSplits('|', 3));
    if (fields.size() != 4 || fields[0].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("squeue output line ", number, ": \"", ForLog(std::string(line), 200), "\" is not id|state|reason|nodes"));
    }
    jobs.push_back({fields[0], fields[1], fields[2], fields[3]});
  }
  return jobs;
}

absl::StatusOr<std::string> ParseSbatchId(const std::string& text) {
  std::string id(absl::StripAsciiWhitespace(text));
  id = id.substr(0, id.find(';'));  // "12;cluster" on a federation
  uint64_t number = 0;
  if (id.empty() || !absl::SimpleAtoi(id, &number)) {
    return absl::InvalidArgumentError(absl::StrCat("sbatch --parsable printed \"", ForLog(text, 200),
                                                   "\", not a job id"));
  }
  return id;
}

absl::StatusOr<std::string> SlurmCli::Submit(const std::vector<std::string>& args, const std::string& script) const {
  std::vector<std::string> argv = {commands_.sbatch, "--parsable"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(script);
  absl::StatusOr<std::string> out = Run(argv, commands_.timeout);
  if (!out.ok()) return out.status();
  return ParseSbatchId(*out);
}

absl::StatusOr<std::vector<SlurmJobState>> SlurmCli::Queue(const std::string& job_name) const {
  absl::StatusOr<std::string> out = Run(
      {commands_.squeue, "--noheader", "--name=" + job_name, "--format=%i|%T|%r|%N"}, commands_.timeout);
  if (!out.ok()) return out.status();
  return ParseSqueue(*out);
}

absl::Status SlurmCli::Cancel(const std::vector<std::string>& ids) const {
  if (ids.empty()) return absl::OkStatus();
  std::vector<std::string> argv = {commands_.scancel};
  argv.insert(argv.end(), ids.begin(), ids.end());
  return Run(argv, commands_.timeout).status();
}

}  // namespace quark::server
