#include "client/sweep_output.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/output.h"

namespace quark::client {

std::string SweepTable(const quark::v1::SweepResult& sweep) {
  std::string out;
  if (sweep.ppl_float() > 0) absl::StrAppend(&out, absl::StrFormat("float perplexity: %.4f\n", sweep.ppl_float()));
  absl::StrAppend(&out, absl::StrFormat("%-28s %-10s %6s %10s %10s %8s %10s %8s  %s\n", "SCHEME", "STATE", "BITS",
                                        "SIZE_MIB", "PPL", "dPPL", "KLD", "SECONDS", "JOB"));
  for (const quark::v1::SweepCandidate& row : sweep.candidates()) {
    const std::string job = row.job_id().empty() ? "-" : row.job_id();
    const std::string bits = row.bits_per_weight() > 0 ? absl::StrFormat("%.3f", row.bits_per_weight()) : "-";
    if (row.state() != quark::v1::JOB_STATE_SUCCEEDED) {
      absl::StrAppend(&out, absl::StrFormat("%-28s %-10s %6s %10s %10s %8s %10s %8s  %s", row.scheme(),
                                            StateName(row.state()), bits, "-", "-", "-", "-", "-", job));
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
    absl::StrAppend(&out, absl::StrFormat("%-28s %-10s %6s %10.3f %10s %8s %10s %8.1f  %s\n", row.scheme(),
                                          StateName(row.state()), bits, row.size_bytes() / 1048576.0, ppl, delta, kld,
                                          row.seconds(), job));
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
