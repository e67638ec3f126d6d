// #36: a sweep job's table of candidates as quarkctl prints it (quarkctl get / submit --wait on the parent).
#pragma once

#include <string>

#include "quark/v1/service.pb.h"

namespace quark::client {

/// One row per candidate: SCHEME, STATE, BITS (per weight of the decoder linears), SIZE (MiB of artifacts), PPL,
/// dPPL (relative to the float perplexity), KLD, SECONDS, JOB; a dropped or failed candidate's row ends with its
/// error. Above the rows: the float perplexity when known.
std::string SweepTable(const quark::v1::SweepResult& sweep);

}  // namespace quark::client
