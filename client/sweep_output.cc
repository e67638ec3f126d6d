#include "client/sweep_output.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/output.h"

namespace quark::client {

namespace {

// The tasks any row (or the float model) has a score for, in name order: one column each.
std::vector<std::string> TaskColumns(const quark::v1::SweepResult& sweep) {
  std::set<std::string> names;
  for (const auto& [task, score] : sweep.task_scores_float()) names.insert(task);
  for (const quark::v1::SweepCandidate& row : sweep.candidates()) {
    for (const auto& [task, score] : row.task_scores()) names.insert(task);
  }
  return {names.begin(), names.end()};
}

std::string TaskCells(const google::protobuf::Map<std::string, double>& scores, const std::vector<std::string>& tasks) {
  std::string out;
  for (const std::string& task : tasks) {
    auto it = scores.find(task);
    absl::StrAppend(&out, absl::StrFormat(" %*s", static_cast<int>(std::max<size_t>(task.size(), 8)),
                                          it == scores.end() ? std::string("-") : absl::StrFormat("%.4f", it->second)));
  }
  return out;
}

// A split sensitivity pass's row names its layers beside the scheme.
std::string SchemeCell(const quark::v1::SweepCandidate& row) {
  if (row.layer_count() <= 0) return row.scheme();
  return absl::StrCat(row.scheme(), " [", row.first_layer(), "..", row.first_layer() + row.layer_count() - 1, "]");
}

}  // namespace

std::string SweepTable(const quark::v1::SweepResult& sweep) {
  std::string out;
  const std::vector<std::string> tasks = TaskColumns(sweep);
  if (sweep.ppl_float() > 0) absl::StrAppend(&out, absl::StrFormat("float perplexity: %.4f\n", sweep.ppl_float()));
  if (!sweep.task_scores_float().empty()) {
    absl::StrAppend(&out, "float task scores:", TaskCells(sweep.task_scores_float(), tasks), "\n");
  }
  std::string task_heads;
  for (const std::string& task : tasks) {
    absl::StrAppend(&task_heads, absl::StrFormat(" %*s", static_cast<int>(std::max<size_t>(task.size(), 8)), task));
  }
  absl::StrAppend(&out, absl::StrFormat("%-28s %-10s %6s %10s %10s %8s %10s%s %8s  %s\n", "SCHEME", "STATE", "BITS",
                                        "SIZE_MIB", "PPL", "dPPL", "KLD", task_heads, "SECONDS", "JOB"));
  for (const quark::v1::SweepCandidate& row : sweep.candidates()) {
    const std::string job = row.job_id().empty() ? "-" : row.job_id();
    const std::string bits = row.bits_per_weight() > 0 ? absl::StrFormat("%.3f", row.bits_per_weight()) : "-";
    const std::string no_tasks = TaskCells({}, tasks);
    if (row.state() != quark::v1::JOB_STATE_SUCCEEDED) {
      absl::StrAppend(&out, absl::StrFormat("%-28s %-10s %6s %10s %10s %8s %10s%s %8s  %s", SchemeCell(row),
                                            StateName(row.state()), bits, "-", "-", "-", "-", no_tasks, "-", job));
      absl::StrAppend(&out, row.error().empty() ? "\n" : absl::StrCat("  ", row.error(), "\n"));
      continue;
    }
    // An automatic search's sensitivity passes evaluate nothing: no perplexity, no KLD.
    const bool evaluated = row.ppl() > 0;
    const std::string ppl = evaluated ? absl::StrFormat("%.4f", row.ppl()) : "-";
    const std::string kld = evaluated ? absl::StrFormat("%.6f", row.kld()) : "-";
    const std::string delta = evaluated && sweep.ppl_float() > 0
                                  ? absl::StrFormat("%+.2f%%", 100.0 * (row.ppl() / sweep.ppl_float() - 1.0))
                                  : "-";
    absl::StrAppend(&out, absl::StrFormat("%-28s %-10s %6s %10.3f %10s %8s %10s%s %8.1f  %s\n", SchemeCell(row),
                                          StateName(row.state()), bits, row.size_bytes() / 1048576.0, ppl, delta, kld,
                                          TaskCells(row.task_scores(), tasks), row.seconds(), job));
  }
  return out;
}

std::string AutoSearchRounds(const quark::v1::AutoSearchResult& search) {
  std::string out = absl::StrFormat("%-8s %8s %12s %12s %10s %10s  %s\n", "ROUND", "BITS", "KLD_PRED", "KLD_MEAS",
                                    "dPPL_PRED", "dPPL_MEAS", "JOB");
  for (int i = 0; i < search.rounds_size(); ++i) {
    const quark::v1::AutoSearchRound& r = search.rounds(i);
    absl::StrAppend(&out, absl::StrFormat("%-8d %8.3f %12.6f %12.6f %+9.2f%% %+9.2f%%  %s\n", i + 1,
                                          r.bits_per_weight(), r.predicted_kld(), r.measured_kld(),
                                          100 * r.predicted_ppl_increase(), 100 * r.measured_ppl_increase(),
                                          r.job_id()));
  }
  if (search.rounds_size() == 0) return out;
  absl::StrAppend(&out, search.met() ? "budget met" : "budget NOT met", "; recipe (group: scheme):\n");
  const quark::v1::AutoSearchRound& last = search.rounds(search.rounds_size() - 1);
  for (int g = 0; g < search.groups_size() && g < last.choice_size(); ++g) {
    absl::StrAppend(&out, "  ", search.groups(g).name(), ": ", last.choice(g), "\n");
  }
  return out;
}

}  // namespace quark::client
