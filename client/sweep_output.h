// #36: a sweep job's table of candidates as quarkctl prints it (quarkctl get / submit --wait on the parent).
#pragma once

#include <string>

#include "quark/v1/service.pb.h"

namespace quark::client {

/// One row per candidate: SCHEME, STATE, BITS (per weight of the decoder linears), SIZE (MiB of artifacts), PPL,
/// dPPL (relative to the float perplexity), KLD, SECONDS, JOB; a dropped or failed candidate's row ends with its
/// error. With evaluation tasks, one column per task (the export's score, SweepCandidate.task_scores) before SECONDS
/// and the float scores above the rows; a split sensitivity pass's scheme names its layers ("int8 [0..1]"). Above the
/// rows: the float perplexity when known.
std::string SweepTable(const quark::v1::SweepResult& sweep);

/// #36 item 3: an automatic search's rounds (bits per weight, predicted vs measured KLD and perplexity increase,
/// the verification job), whether the last met the budget, and the chosen scheme per linear group.
std::string AutoSearchRounds(const quark::v1::AutoSearchResult& search);

}  // namespace quark::client
