#include "server/scheduler/result_check.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace quark::server {
namespace {

constexpr size_t kMaxQuoted = 200;

std::string Quote(absl::string_view uri) {
  if (uri.size() <= kMaxQuoted) return absl::StrCat("\"", uri, "\"");
  return absl::StrCat("\"", uri.substr(0, kMaxQuoted), "...\" (", uri.size(), " bytes)");
}

// The part after the prefix names a file inside it: no way out, no way to be read differently elsewhere.
bool SafeRelative(absl::string_view relative) {
  if (relative.empty()) return false;
  for (char c : relative) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\' || c == '%') return false;
  }
  for (absl::string_view segment : absl::StrSplit(relative, '/')) {
    if (segment.empty() || segment == "." || segment == "..") return false;
  }
  return true;
}

absl::Status CheckUri(const std::string& field, const std::string& uri, const std::string& prefix) {
  if (uri.size() > prefix.size() && uri.compare(0, prefix.size(), prefix) == 0 &&
      SafeRelative(absl::string_view(uri).substr(prefix.size()))) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(field, ": ", Quote(uri), " is not under the job's output prefix ",
                                                  Quote(prefix)));
}

// The attempt folder a relative path starts in ("attempt-3/model.safetensors" -> 3), or -1 when it starts in none.
int64_t AttemptFolderOf(absl::string_view relative) {
  constexpr absl::string_view kFolder = "attempt-";
  absl::string_view first = relative.substr(0, relative.find('/'));
  if (first.size() == relative.size() || !absl::ConsumePrefix(&first, kFolder)) return -1;
  int64_t attempt = 0;
  const bool digits = !first.empty() && first.size() < 10 &&
                      first.find_first_not_of("0123456789") == absl::string_view::npos;
  return digits && absl::SimpleAtoi(first, &attempt) ? attempt : -1;
}

absl::Status CheckAttempt(const std::string& field, const std::string& uri, const std::string& prefix,
                          int64_t current) {
  const int64_t attempt = AttemptFolderOf(absl::string_view(uri).substr(prefix.size()));
  if (attempt < 0 || attempt == current) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(field, ": ", Quote(uri), " is in attempt ", attempt,
                                                  "'s folder, but the completing lease is attempt ", current,
                                                  "'s (a stale attempt's artifacts are never taken)"));
}

}  // namespace

std::string JobOutputPrefix(const quark::v1::Job& job) {
  absl::string_view output = job.spec().output_uri();
  while (!output.empty() && output.back() == '/') output.remove_suffix(1);
  return absl::StrCat(output, "/", job.id(), "/");
}

absl::Status CheckResultUris(const quark::v1::Job& job, const quark::v1::JobResult& result) {
  const std::string prefix = JobOutputPrefix(job);
  const auto check = [&](const std::string& field, const std::string& uri) {
    absl::Status status = CheckUri(field, uri, prefix);
    return status.ok() ? CheckAttempt(field, uri, prefix, job.attempts_size()) : status;
  };
  for (int i = 0; i < result.artifacts_size(); ++i) {
    absl::Status status = check(absl::StrCat("result.artifacts[", i, "].uri"), result.artifacts(i).uri());
    if (!status.ok()) return status;
  }
  if (!result.manifest_uri().empty()) return check("result.manifest_uri", result.manifest_uri());
  return absl::OkStatus();
}

std::string ForgedResultError(const std::string& worker_id, const absl::Status& refusal) {
  return absl::StrCat("completion refused: worker ", worker_id.substr(0, kMaxQuoted),
                      " reported a result outside the job's output prefix (", refusal.message(), ")");
}

absl::Status AnswerRepeatedCompletion(JobStore& store, const quark::v1::internal::CompleteRequest& request,
                                      absl::Status not_held) {
  if (!absl::IsNotFound(not_held) || !request.success() || request.job_id().empty() ||
      request.result().manifest_uri().empty()) {
    return not_held;
  }
  absl::StatusOr<quark::v1::Job> job = store.GetJob(request.job_id());
  if (job.ok() && job->state() == quark::v1::JobState::JOB_STATE_SUCCEEDED &&
      job->result().manifest_uri() == request.result().manifest_uri()) {
    return absl::OkStatus();
  }
  return not_held;
}

}  // namespace quark::server
