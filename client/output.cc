#include "client/output.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "worker/storage/strings.h"

namespace quark::client {
namespace {

std::string Percent(double fraction) {
  return str::Cat(static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * 100)), "%");
}

std::string Duration(double seconds) {
  int64_t s = static_cast<int64_t>(std::lround(std::max(seconds, 0.0)));
  if (s >= 3600) return str::Cat(s / 3600, "h", (s % 3600) / 60 < 10 ? "0" : "", (s % 3600) / 60, "m");
  if (s >= 60) return str::Cat(s / 60, "m", s % 60 < 10 ? "0" : "", s % 60, "s");
  return str::Cat(s, "s");
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
  std::string out = str::Cat(p.phase(), " ", Percent(p.fraction()));
  if (p.num_layers() > 0) str::Append(&out, " (", p.layer(), "/", p.num_layers(), ")");
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
  return std::string(str::StripPrefix(quark::v1::JobState_Name(state), "JOB_STATE_"));
}

std::string JobTable(const quark::v1::Job& job) {
  std::string out;
  auto row = [&](const std::string& key, const std::string& value) { str::Append(&out, Pad(key + ":", 11), value, "\n"); };
  row("id", job.id());
  row("state", StateName(job.state()));
  row("model", job.spec().model_uri());
  row("scheme", job.spec().has_config() ? "(config)" : job.spec().preset());
  row("output", job.spec().output_uri());
  row("progress", ProgressSummary(job.progress()));
  row("created", Time(job.created_at()));
  if (job.has_finished_at()) row("finished", Time(job.finished_at()));
  if (!job.worker_id().empty()) row("worker", job.worker_id());
  if (job.attempts_size() > 0) row("attempts", str::Cat(job.attempts_size()));
  if (!job.result().manifest_uri().empty()) row("manifest", job.result().manifest_uri());
  for (const auto& artifact : job.result().artifacts()) {
    row("artifact", str::Cat(artifact.uri(), " (", artifact.size_bytes(), " bytes)"));
  }
  std::vector<std::string> metrics;
  for (const auto& [name, value] : job.result().metrics()) metrics.push_back(str::Cat(name, "=", value));
  std::sort(metrics.begin(), metrics.end());
  if (!metrics.empty()) row("metrics", str::Join(metrics, " "));
  if (!job.error().empty()) row("error", job.error());
  return out;
}

std::string JobListTable(const std::vector<quark::v1::Job>& jobs) {
  std::string out = str::Cat(Pad("ID", 24), Pad("STATE", 11), Pad("PROGRESS", 24), Pad("CREATED", 22), "MODEL\n");
  for (const quark::v1::Job& job : jobs) {
    str::Append(&out, Pad(job.id(), 24), Pad(StateName(job.state()), 11), Pad(ProgressSummary(job.progress()), 24),
                Pad(Time(job.created_at()), 22), job.spec().model_uri(), "\n");
  }
  return out;
}

std::string PresetsTable(const quark::v1::ListPresetsResponse& presets) {
  std::string out = str::Cat(Pad("NAME", 28), "DESCRIPTION\n");
  for (const auto& preset : presets.presets()) {
    str::Append(&out, Pad(preset.name(), 28), preset.description(), preset.legacy() ? " (legacy name)" : "", "\n");
  }
  return out;
}

std::string ValidateTable(const quark::v1::ValidateConfigResponse& response) {
  std::string out = response.valid() ? "valid\n" : "invalid\n";
  for (const std::string& error : response.errors()) str::Append(&out, "error: ", error, "\n");
  for (const std::string& warning : response.warnings()) str::Append(&out, "warning: ", warning, "\n");
  if (response.layers_size() > 0) str::Append(&out, Pad("MODULE", 40), Pad("TYPE", 12), "SOURCE\n");
  for (const auto& layer : response.layers()) {
    str::Append(&out, Pad(layer.module(), 40), Pad(layer.module_type(), 12), layer.source(), "\n");
  }
  return out;
}

std::string ProgressBar(const quark::v1::Progress& progress, int width) {
  double f = std::clamp(progress.fraction(), 0.0, 1.0);
  int filled = static_cast<int>(f * width);
  std::string bar = "[" + std::string(filled, '=') + (filled < width ? ">" : "") +
                    std::string(std::max(width - filled - 1, 0), ' ') + "]";
  std::string out = str::Cat(bar, " ", Percent(f), " ", progress.phase());
  if (progress.num_layers() > 0) str::Append(&out, " ", progress.layer(), "/", progress.num_layers());
  if (progress.eta_seconds() > 0) str::Append(&out, " eta ", Duration(progress.eta_seconds()));
  return out;
}

std::string EventLine(const quark::v1::JobEvent& event) {
  std::string prefix = str::Cat("#", event.sequence(), " ");
  switch (event.event_case()) {
    case quark::v1::JobEvent::kState: {
      std::string out = prefix + StateName(event.state());
      if (!event.job().error().empty()) str::Append(&out, ": ", event.job().error());
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
