#include "client/output.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/sweep_output.h"
#include "worker/storage/publish.h"

namespace quark::client {
namespace {

// Six decimals with trailing zeros dropped ("9.5", "12.345678"), not absl's six significant digits.
std::string Number(double value) {
  std::string text = std::to_string(value);
  while (text.size() > 1 && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

std::string Percent(double fraction) {
  return absl::StrCat(static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * 100)), "%");
}

std::string Duration(double seconds) {
  int64_t s = static_cast<int64_t>(std::lround(std::max(seconds, 0.0)));
  if (s >= 3600) return absl::StrCat(s / 3600, "h", (s % 3600) / 60 < 10 ? "0" : "", (s % 3600) / 60, "m");
  if (s >= 60) return absl::StrCat(s / 60, "m", s % 60 < 10 ? "0" : "", s % 60, "s");
  return absl::StrCat(s, "s");
}

std::string Time(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "-";
  std::string text = google::protobuf::util::TimeUtil::ToString(time);
  return text.substr(0, std::min<size_t>(text.size(), 19)) + "Z";
}

std::string Pad(const std::string& text, size_t width) {
  return text.size() >= width ? text + " " : text + std::string(width - text.size(), ' ');
}

std::string ProgressSummary(const quark::v1::Progress& p) {
  if (p.phase().empty()) return "-";
  std::string out = absl::StrCat(p.phase(), " ", Percent(p.fraction()));
  if (p.num_layers() > 0) absl::StrAppend(&out, " (", p.layer(), "/", p.num_layers(), ")");
  return out;
}

}  // namespace

int ExitCodeForState(quark::v1::JobState state) {
  if (state == quark::v1::JOB_STATE_FAILED) return kExitJobFailed;
  if (state == quark::v1::JOB_STATE_CANCELLED) return kExitCancelled;
  return kExitOk;
}

std::string ToJsonLine(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}";
  return json;
}

std::string StateName(quark::v1::JobState state) {
  return std::string(absl::StripPrefix(quark::v1::JobState_Name(state), "JOB_STATE_"));
}

std::string JobTable(const quark::v1::Job& job) {
  std::string out;
  auto row = [&](const std::string& key, const std::string& value) { absl::StrAppend(&out, Pad(key + ":", 11), value, "\n"); };
  row("id", job.id());
  row("state", StateName(job.state()));
  row("model", job.spec().model_uri());
  row("scheme", job.spec().sweep_size() > 0 ? absl::StrCat("sweep of ", absl::StrJoin(job.spec().sweep(), ","))
                : job.spec().has_auto_search()
                    ? absl::StrCat("automatic search over ", absl::StrJoin(job.spec().auto_search().candidates(), ","))
                : job.spec().has_config() ? "(config)"
                : job.spec().sensitivity_pass() ? absl::StrCat("sensitivity pass of ", job.spec().preset())
                                                : job.spec().preset());
  if (!job.parent_id().empty()) row("parent", absl::StrCat("sweep job ", job.parent_id()));
  row("output", job.spec().output_uri());
  row("progress", ProgressSummary(job.progress()));
  row("created", Time(job.created_at()));
  if (job.has_finished_at()) row("finished", Time(job.finished_at()));
  if (!job.worker_id().empty()) row("worker", job.worker_id());
  if (!job.deduplicated_from().empty()) row("dedup", absl::StrCat("deduplicated from job ", job.deduplicated_from()));
  if (job.spec().deadline_seconds() > 0) row("deadline", absl::StrCat(job.spec().deadline_seconds(), " s"));
  // What a worker must have announced to lease it (quarkd's estimate at submit; absent = unknown, any worker).
  if (job.needs_host_memory_bytes() > 0 || job.needs_gpu_memory_bytes() > 0) {
    auto gib = [](int64_t bytes) { return absl::StrFormat("%.1f GiB", bytes / double(1ll << 30)); };
    std::string needs = absl::StrCat(gib(job.needs_host_memory_bytes()), " host memory");
    if (job.needs_gpu_memory_bytes() > 0) absl::StrAppend(&needs, ", ", gib(job.needs_gpu_memory_bytes()), " GPU memory");
    row("needs", needs);
  }
  if (job.attempts_size() > 0) row("attempts", absl::StrCat(job.attempts_size()));
  if (!job.result().manifest_uri().empty()) row("manifest", job.result().manifest_uri());
  // #36: a sweep's or a search's own manifest, its comparison table (quarkd writes it as the parent ends; the
  // parent's events say whether it was written and its SHA-256).
  if ((job.spec().sweep_size() > 0 || job.spec().has_auto_search()) && job.has_finished_at()) {
    row("table", storage::SweepManifestUri(job.spec().output_uri(), job.id()));
  }
  for (const auto& artifact : job.result().artifacts()) {
    row("artifact", absl::StrCat(artifact.uri(), " (", artifact.size_bytes(), " bytes)"));
  }
  std::vector<std::string> metrics;
  for (const auto& [name, value] : job.result().metrics()) metrics.push_back(absl::StrCat(name, "=", Number(value)));
  std::sort(metrics.begin(), metrics.end());
  if (!metrics.empty()) row("metrics", absl::StrJoin(metrics, " "));
  if (!job.error().empty()) row("error", job.error());
  if (job.has_sweep()) absl::StrAppend(&out, "\n", SweepTable(job.sweep()));
  if (job.has_auto_search()) absl::StrAppend(&out, "\n", AutoSearchRounds(job.auto_search()));
  return out;
}

std::string JobListTable(const std::vector<quark::v1::Job>& jobs) {
  std::string out = absl::StrCat(Pad("ID", 24), Pad("STATE", 11), Pad("PROGRESS", 24), Pad("CREATED", 22), "MODEL\n");
  for (const quark::v1::Job& job : jobs) {
    absl::StrAppend(&out, Pad(job.id(), 24), Pad(StateName(job.state()), 11), Pad(ProgressSummary(job.progress()), 24),
                Pad(Time(job.created_at()), 22), job.spec().model_uri(), "\n");
  }
  return out;
}

std::string PresetsTable(const quark::v1::ListPresetsResponse& presets) {
  std::string out = absl::StrCat(Pad("NAME", 28), "DESCRIPTION\n");
  for (const auto& preset : presets.presets()) {
    absl::StrAppend(&out, Pad(preset.name(), 28), preset.description(), preset.legacy() ? " (legacy name)" : "", "\n");
  }
  return out;
}

std::string ValidateTable(const quark::v1::ValidateConfigResponse& response) {
  std::string out = response.valid() ? "valid\n" : "invalid\n";
  for (const std::string& error : response.errors()) absl::StrAppend(&out, "error: ", error, "\n");
  for (const std::string& warning : response.warnings()) absl::StrAppend(&out, "warning: ", warning, "\n");
  if (response.layers_size() > 0) absl::StrAppend(&out, Pad("MODULE", 40), Pad("TYPE", 12), "SOURCE\n");
  for (const auto& layer : response.layers()) {
    absl::StrAppend(&out, Pad(layer.module(), 40), Pad(layer.module_type(), 12), layer.source(), "\n");
  }
  for (const quark::v1::Estimate& e : response.estimates()) absl::StrAppend(&out, EstimateTable(e));
  return out;
}

std::string EstimateTable(const quark::v1::Estimate& e) {
  auto gib = [](int64_t bytes) { return absl::StrFormat("%.2f GiB", bytes / double(1ll << 30)); };
  std::string out = absl::StrCat("\nestimate on ", e.worker_kind());
  if (e.worker_ids_size() > 0) absl::StrAppend(&out, " (", absl::StrJoin(e.worker_ids(), ", "), ")");
  absl::StrAppend(&out, "\n", Pad("PHASE", 18), Pad("TIME", 12), Pad("PEAK HOST", 14), "PEAK GPU\n");
  for (const quark::v1::PhaseEstimate& p : e.phases()) {
    absl::StrAppend(&out, Pad(p.phase(), 18), Pad(absl::StrFormat("%.1f s", p.seconds()), 12),
                    Pad(gib(p.peak_host_bytes()), 14), gib(p.peak_gpu_bytes()), "\n");
  }
  absl::StrAppend(&out, Pad("total", 18), Pad(absl::StrFormat("%.1f s", e.total_seconds()), 12),
                  Pad(gib(e.peak_host_bytes()), 14), gib(e.peak_gpu_bytes()), "\n");
  for (const quark::v1::ArtifactEstimate& a : e.artifacts()) {
    absl::StrAppend(&out, "artifact ", absl::AsciiStrToLower(absl::StripPrefix(quark::v1::ExportFormat_Name(a.format()), "EXPORT_FORMAT_")), ": ",
                    absl::StrFormat("%.3f GB (%d bytes)", a.bytes() / 1e9, a.bytes()), "\n");
  }
  if (!e.does_not_fit().empty()) absl::StrAppend(&out, "does not fit: ", e.does_not_fit(), "\n");
  return out;
}

std::string ProgressBar(const quark::v1::Progress& progress, int width) {
  double f = std::clamp(progress.fraction(), 0.0, 1.0);
  int filled = static_cast<int>(f * width);
  std::string bar = "[" + std::string(filled, '=') + (filled < width ? ">" : "") +
                    std::string(std::max(width - filled - 1, 0), ' ') + "]";
  std::string out = absl::StrCat(bar, " ", Percent(f), " ", progress.phase());
  if (progress.num_layers() > 0) absl::StrAppend(&out, " ", progress.layer(), "/", progress.num_layers());
  if (progress.eta_seconds() > 0) absl::StrAppend(&out, " eta ", Duration(progress.eta_seconds()));
  return out;
}

std::string EventLine(const quark::v1::JobEvent& event) {
  std::string prefix = absl::StrCat("#", event.sequence(), " ");
  switch (event.event_case()) {
    case quark::v1::JobEvent::kState: {
      std::string out = prefix + StateName(event.state());
      if (!event.job().deduplicated_from().empty()) {
        absl::StrAppend(&out, " (deduplicated from job ", event.job().deduplicated_from(), ")");
      }
      if (!event.job().error().empty()) absl::StrAppend(&out, ": ", event.job().error());
      return out;
    }
    case quark::v1::JobEvent::kProgress:
      return prefix + ProgressBar(event.progress(), 20) +
             (event.progress().message().empty() ? "" : "  " + event.progress().message());
    case quark::v1::JobEvent::kLog:
      return prefix + "log: " + event.log();
    default:
      return prefix + "(empty event)";
  }
}

}  // namespace quark::client
