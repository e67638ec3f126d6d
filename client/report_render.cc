// quarkctl report's text and Markdown forms of BuildJobReport's JSON (job_report.h).
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/job_report.h"

namespace quark::client {
namespace {

using Json = nlohmann::json;

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

std::string Num(const Json& value) {
  if (!value.is_number()) return "-";
  return absl::StrFormat("%.6g", value.get<double>());
}

std::string Cell(const Json& object, const std::string& key) {
  return object.is_object() && object.contains(key) ? Num(object[key]) : "-";
}

std::vector<Table> Tables(const Json& r) {
  std::vector<Table> tables;
  const std::vector<std::string> models = r["models"].get<std::vector<std::string>>();
  if (!r["perplexity"].empty()) {
    Table t{"Perplexity", {"model", "ppl"}, {}};
    for (const auto& m : models) {
      if (r["perplexity"].contains(m)) t.rows.push_back({m, Num(r["perplexity"][m])});
    }
    tables.push_back(t);
  }
  if (!r["kld"].empty()) {
    Table t{"KL divergence against the float model",
            {"model", "mean KLD", "± stderr", "median", "p99", "same top", "mean Δp"},
            {}};
    for (const auto& [label, k] : r["kld"].items()) {
      t.rows.push_back({label, Cell(k, "mean"), Cell(k, "mean_stderr"), Cell(k, "median"), Cell(k, "p99"),
                        Cell(k, "same_top"), Cell(k, "delta_p")});
    }
    tables.push_back(t);
  }
  if (!r["tasks"].empty()) {
    Table t{"Tasks", {"task", "metric"}, {}};
    for (const auto& m : models) {
      if (m != "fake_quant") t.header.push_back(m);
    }
    t.header.push_back("worst drop");
    for (const auto& [task, metrics] : r["tasks"].items()) {
      for (const auto& [metric, values] : metrics.items()) {
        std::vector<std::string> row = {task, metric};
        double worst = 0;
        bool any = false;
        for (size_t c = 2; c + 1 < t.header.size(); ++c) {
          row.push_back(Cell(values, t.header[c]));
          if (t.header[c] != "float" && values.contains("float") && values.contains(t.header[c])) {
            worst = std::max(worst, values["float"].get<double>() - values[t.header[c]].get<double>());
            any = true;
          }
        }
        row.push_back(any && metric.find("stderr") == std::string::npos && metric != "perplexity" ? Num(worst) : "");
        t.rows.push_back(row);
      }
    }
    tables.push_back(t);
  }
  Table size{"Artifacts and time", {"what", "value"}, {}};
  size.rows.push_back(
      {"artifacts", absl::StrCat(r["artifacts"].size(), " files, ", r["size_bytes"].get<int64_t>(), " bytes")});
  for (const auto& [name, seconds] : r["seconds"].items()) size.rows.push_back({"seconds " + name, Num(seconds)});
  tables.push_back(size);
  return tables;
}

std::string Header(const Json& r) {
  std::string out = absl::StrCat("job ", r["job"].get<std::string>(), " (", r["state"].get<std::string>(), ") ",
                                 r["model"].get<std::string>(), "\n");
  if (r.contains("gate")) {
    absl::StrAppend(&out, "gate: ", r["gate"]["passed"].get<bool>() ? "passed" : "FAILED",
                    r["gate"]["failure"].get<std::string>().empty() ? "" : ": ",
                    r["gate"]["failure"].get<std::string>(), "\n");
  } else if (!r["error"].get<std::string>().empty()) {
    absl::StrAppend(&out, "error: ", r["error"].get<std::string>(), "\n");
  }
  return out;
}

// Text bars of each task's acc per model, and each Δp histogram (bar per bin, scaled to the fullest).
std::string TextPlots(const Json& r) {
  std::string out;
  for (const auto& [task, metrics] : r["tasks"].items()) {
    if (!metrics.contains("acc")) continue;
    absl::StrAppend(&out, "\n", task, " acc\n");
    for (const auto& [label, value] : metrics["acc"].items()) {
      const int filled = static_cast<int>(value.get<double>() * 40 + 0.5);
      absl::StrAppendFormat(&out, "  %-10s %s%s %.4f\n", label, std::string(filled, '#'), std::string(40 - filled, '.'),
                            value.get<double>());
    }
  }
  const Json histograms = r.value("delta_p_histogram", Json::object());
  for (const auto& [label, h] : histograms.items()) {
    const std::vector<int64_t> counts = h["counts"].get<std::vector<int64_t>>();
    const int64_t most = std::max<int64_t>(1, *std::max_element(counts.begin(), counts.end()));
    const double lo = h["lo"].get<double>(), width = (h["hi"].get<double>() - lo) / counts.size();
    absl::StrAppend(&out, "\nΔp histogram (", label, " - float, correct token's probability)\n");
    for (size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] == 0) continue;
      absl::StrAppendFormat(&out, "  [%+.2f,%+.2f) %-40s %d\n", lo + i * width, lo + (i + 1) * width,
                            std::string(static_cast<size_t>(40 * counts[i] / most), '#'), counts[i]);
    }
  }
  return out;
}

}  // namespace

std::string ReportText(const Json& r) {
  std::string out = Header(r);
  for (const Table& t : Tables(r)) {
    std::vector<size_t> widths(t.header.size(), 0);
    for (size_t c = 0; c < t.header.size(); ++c) widths[c] = t.header[c].size();
    for (const auto& row : t.rows) {
      for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    }
    absl::StrAppend(&out, "\n", t.title, "\n");
    auto line = [&](const std::vector<std::string>& cells) {
      for (size_t c = 0; c < cells.size(); ++c) absl::StrAppendFormat(&out, "  %-*s", widths[c], cells[c]);
      out += "\n";
    };
    line(t.header);
    for (const auto& row : t.rows) line(row);
  }
  return out + TextPlots(r);
}

std::string ReportMarkdown(const Json& r) {
  std::string out = "# " + Header(r);
  for (const Table& t : Tables(r)) {
    absl::StrAppend(&out, "\n## ", t.title, "\n\n| ", absl::StrJoin(t.header, " | "), " |\n|");
    for (size_t c = 0; c < t.header.size(); ++c) out += c == 0 ? "---|" : "---:|";
    out += "\n";
    for (const auto& row : t.rows) absl::StrAppend(&out, "| ", absl::StrJoin(row, " | "), " |\n");
  }
  return out;
}

}  // namespace quark::client
