#include "client/job_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/output.h"

namespace quark::client {
namespace {

using Json = nlohmann::json;

const char* const kLabels[] = {"float", "fake_quant", "reloaded", "gguf", "compressed_tensors"};

bool IsLabel(const std::string& s) {
  return std::any_of(std::begin(kLabels), std::end(kLabels), [&s](const char* label) { return s == label; });
}

// The model label a metric name ends with ("_float", "_reloaded", ...), or "".
std::string LabelSuffix(const std::string& name) {
  for (const char* label : kLabels) {
    if (absl::EndsWith(name, absl::StrCat("_", label))) return label;
  }
  return "";
}

void AddPerplexity(const std::map<std::string, double>& m, Json& report) {
  const std::pair<const char*, const char*> names[] = {
      {"ppl_before", "float"},      {"ppl_after", "fake_quant"},
      {"ppl_reloaded", "reloaded"}, {"ppl_gguf", "gguf"},
      {"ppl_compressed_tensors", "compressed_tensors"}};
  for (const auto& [metric, label] : names) {
    if (auto it = m.find(metric); it != m.end()) report["perplexity"][label] = it->second;
  }
}

void AddKld(const std::map<std::string, double>& m, Json& report) {
  const std::pair<const char*, const char*> figures[] = {
      {"kld_mean_stderr_", "mean_stderr"}, {"kld_mean_", "mean"},      {"kld_median_", "median"}, {"kld_p99_", "p99"},
      {"kld_same_top_", "same_top"},       {"kld_delta_p_", "delta_p"}};
  for (const auto& [name, value] : m) {
    for (const auto& [prefix, figure] : figures) {
      if (!absl::StartsWith(name, prefix)) continue;
      const std::string label = name.substr(std::string(prefix).size());
      if (label.find('_') == std::string::npos || IsLabel(label)) report["kld"][label][figure] = value;
      break;  // "kld_mean_stderr_" is tried before "kld_mean_"
    }
  }
}

// <task>_<metric>_<label> for the tasks the job's spec names.
void AddTasks(const quark::v1::Job& job, const std::map<std::string, double>& m, Json& report) {
  for (const std::string& task : job.spec().evaluation().tasks()) {
    const std::string prefix = task + "_";
    for (const auto& [name, value] : m) {
      const std::string label = LabelSuffix(name);
      if (!absl::StartsWith(name, prefix) || label.empty() || name.size() <= prefix.size() + label.size() + 1) continue;
      const std::string metric = name.substr(prefix.size(), name.size() - prefix.size() - label.size() - 1);
      report["tasks"][task][metric][label] = value;
    }
  }
}

}  // namespace

Json BuildJobReport(const quark::v1::Job& job, const Json& manifest) {
  const std::map<std::string, double> m(job.result().metrics().begin(), job.result().metrics().end());
  Json report = {{"job", job.id()},
                 {"state", StateName(job.state())},
                 {"error", job.error()},
                 {"model", job.spec().model_uri()},
                 {"perplexity", Json::object()},
                 {"kld", Json::object()},
                 {"tasks", Json::object()},
                 {"artifacts", Json::array()},
                 {"seconds", Json::object()}};
  AddPerplexity(m, report);
  AddKld(m, report);
  AddTasks(job, m, report);
  int64_t size = 0;
  for (const auto& a : job.result().artifacts()) {
    report["artifacts"].push_back({{"uri", a.uri()}, {"size_bytes", a.size_bytes()}});
    size += a.size_bytes();
  }
  report["size_bytes"] = size;
  for (const auto& [name, value] : m) {
    if (absl::StartsWith(name, "seconds_")) report["seconds"][name.substr(8)] = value;
  }
  Json models = Json::array();
  for (const char* label : kLabels) {
    const bool seen = report["perplexity"].contains(label) || report["kld"].contains(label) ||
                      std::any_of(report["tasks"].begin(), report["tasks"].end(), [label](const Json& t) {
                        return std::any_of(t.begin(), t.end(), [label](const Json& v) { return v.contains(label); });
                      });
    if (seen) models.push_back(label);
  }
  report["models"] = models;
  if (manifest.is_object()) {
    if (manifest.contains("gate")) report["gate"] = manifest["gate"];
    const Json kld_results = manifest.value("evaluation", Json::object()).value("kld", Json::object());
    for (const auto& [label, kld] : kld_results.items()) {
      if (kld.contains("delta_p_histogram")) report["delta_p_histogram"][label] = kld["delta_p_histogram"];
    }
  }
  if (!report.contains("gate") && absl::StrContains(job.error(), "gate: ")) {
    report["gate"] = {{"passed", false}, {"failure", job.error()}};
  }
  return report;
}

}  // namespace quark::client
