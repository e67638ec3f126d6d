// What quarkctl prints: protobuf JSON (one object per line) or human tables, and its exit codes.
#pragma once

#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "quark/v1/service.pb.h"

namespace quark::client {

/// Exit codes of quarkctl.
enum ExitCode : int {
  kExitOk = 0,          // done; for --wait / watch: the job SUCCEEDED
  kExitJobFailed = 1,   // the job ended FAILED
  kExitUsage = 2,       // bad flags, unreadable or invalid job/config file
  kExitCancelled = 3,   // the job ended CANCELLED
  kExitRpcError = 4,    // quarkd unreachable or refused the call (the gRPC status is printed)
  kExitInvalid = 5,     // validate: the config is not valid
  kExitNotVerified = 6, // verify: a bad or unknown signature, or an artifact that differs from the manifest
};

/// The exit code for a job that ended in `state` (kExitOk for SUCCEEDED and for unfinished states).
int ExitCodeForState(quark::v1::JobState state);

/// protobuf's JSON mapping on one line, field names as in the .proto (snake_case).
std::string ToJsonLine(const google::protobuf::Message& message);

/// "SUCCEEDED", "RUNNING", ...
std::string StateName(quark::v1::JobState state);

/// A job as "key: value" lines (id, state, model, progress, attempts, artifacts, metrics, error).
std::string JobTable(const quark::v1::Job& job);

/// One row per job: ID STATE PROGRESS CREATED MODEL.
std::string JobListTable(const std::vector<quark::v1::Job>& jobs);

/// One row per preset: NAME DESCRIPTION (legacy names marked).
std::string PresetsTable(const quark::v1::ListPresetsResponse& presets);

/// valid/invalid, errors, warnings and the per-layer assignments.
std::string ValidateTable(const quark::v1::ValidateConfigResponse& response);
/// One estimate of ValidateConfig --estimate: per phase time and peak host/GPU memory, totals, artifact sizes.
std::string EstimateTable(const quark::v1::Estimate& estimate);

/// One human line per event: "#seq STATE ..." / "#seq quantize 3/24 [=====>    ] 42% eta 12s" / "#seq log: ...".
std::string EventLine(const quark::v1::JobEvent& event);

/// "[=========>          ] 45% quantize 11/24 eta 1m05s", `width` characters of bar.
std::string ProgressBar(const quark::v1::Progress& progress, int width = 30);

}  // namespace quark::client
