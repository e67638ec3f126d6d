#include "client/report_plot.h"

#include "client/job_report.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace quark::client {
namespace {

using Json = nlohmann::json;

constexpr uint32_t kModelColors[] = {0x4c72b0, 0xdd8452, 0x55a868, 0xc44e52};
constexpr uint32_t kHistogramColor = 0x4c72b0;
constexpr int kPanelHeight = 220;

std::string XmlEscaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

void TaskPanel(const std::vector<std::pair<std::string, Json>>& tasks, int top, ReportPlot& plot) {
  plot.texts.push_back({10, top + 12.0, 11, "task accuracy (acc) per model"});
  const double group = (plot.width - 60.0) / tasks.size();
  for (size_t t = 0; t < tasks.size(); ++t) {
    size_t k = 0;
    for (const auto& [label, value] : tasks[t].second.items()) {
      const double bar = group / (tasks[t].second.size() + 1), x = 40 + t * group + k * bar;
      const double h = (kPanelHeight - 60) * value.get<double>();
      plot.rects.push_back({x, top + kPanelHeight - 30 - h, bar * 0.9, h, kModelColors[k % std::size(kModelColors)],
                            absl::StrFormat("%s %s %.4f", tasks[t].first, label, value.get<double>())});
      plot.texts.push_back({x, top + kPanelHeight - 18.0, 9, label});
      ++k;
    }
    plot.texts.push_back({40 + t * group, top + kPanelHeight - 5.0, 11, tasks[t].first});
  }
}

void HistogramPanel(const std::string& label, const Json& histogram, int top, ReportPlot& plot) {
  const std::vector<int64_t> counts = histogram["counts"].get<std::vector<int64_t>>();
  plot.texts.push_back({10, top + 12.0, 11, "Δp histogram, " + label + " vs float (-1 .. +1)"});
  if (counts.empty()) return;
  const int64_t most = std::max<int64_t>(1, *std::max_element(counts.begin(), counts.end()));
  const double bar = (plot.width - 60.0) / counts.size();
  for (size_t i = 0; i < counts.size(); ++i) {
    const double h = (kPanelHeight - 50.0) * counts[i] / most;
    plot.rects.push_back({40 + i * bar, top + kPanelHeight - 20 - h, bar * 0.9, h, kHistogramColor,
                          absl::StrFormat("%d", counts[i])});
  }
}

}  // namespace

ReportPlot LayoutReportPlot(const Json& r) {
  std::vector<std::pair<std::string, Json>> tasks;
  for (const auto& [task, metrics] : r["tasks"].items()) {
    if (metrics.contains("acc")) tasks.emplace_back(task, metrics["acc"]);
  }
  const auto histograms = r.value("delta_p_histogram", Json::object());
  ReportPlot plot;
  plot.height = 40 + kPanelHeight * static_cast<int>((tasks.empty() ? 0 : 1) + histograms.size());
  plot.texts.push_back({10, 20, 14, "job " + r["job"].get<std::string>()});
  int top = 40;
  if (!tasks.empty()) {
    TaskPanel(tasks, top, plot);
    top += kPanelHeight;
  }
  for (const auto& [label, h] : histograms.items()) {
    HistogramPanel(label, h, top, plot);
    top += kPanelHeight;
  }
  return plot;
}

std::string ReportSvg(const Json& report) {
  const ReportPlot plot = LayoutReportPlot(report);
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n",
      plot.width, plot.height);
  for (const PlotRect& r : plot.rects) {
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#%06x\"><title>%s"
                          "</title></rect>\n",
                          r.x, r.y, r.w, r.h, r.rgb, XmlEscaped(r.title));
  }
  for (const PlotText& t : plot.texts) {
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\">%s</text>\n", t.x, t.y, t.size,
                          XmlEscaped(t.text));
  }
  return svg + "</svg>\n";
}

}  // namespace quark::client
