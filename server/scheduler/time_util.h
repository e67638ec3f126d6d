// Conversions between absl::Time and protobuf Timestamps, and job-state label names.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"
#include "quark/v1/service.pb.h"

namespace quark::server {

inline google::protobuf::Timestamp ToTimestamp(absl::Time time) {
  google::protobuf::Timestamp out;
  int64_t nanos = absl::ToUnixNanos(time);
  out.set_seconds(nanos / 1000000000);
  out.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return out;
}

inline absl::Time FromTimestamp(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

/// "queued", "running", "succeeded", "failed", "cancelled" (metric labels and logs).
inline std::string StateLabel(quark::v1::JobState state) {
  switch (state) {
    case quark::v1::JOB_STATE_QUEUED: return "queued";
    case quark::v1::JOB_STATE_RUNNING: return "running";
    case quark::v1::JOB_STATE_SUCCEEDED: return "succeeded";
    case quark::v1::JOB_STATE_FAILED: return "failed";
    case quark::v1::JOB_STATE_CANCELLED: return "cancelled";
    default: return "unspecified";
  }
}

}  // namespace quark::server
