// The report's plot as shapes: task accuracy per model as grouped bars and each export's Δp histogram, laid out
// once (LayoutReportPlot) and drawn as SVG (ReportSvg) or rasterised to PNG (ReportPng, png_image.h), so that both
// pictures show the same bars at the same places.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace quark::client {

/// A filled rectangle in pixels from the top-left corner; `rgb` is 0xRRGGBB; `title` the SVG tooltip.
struct PlotRect {
  double x = 0, y = 0, w = 0, h = 0;
  uint32_t rgb = 0;
  std::string title;
};

/// A line of text whose baseline starts at (x, y); `size` in pixels (SVG font-size).
struct PlotText {
  double x = 0, y = 0;
  int size = 11;
  std::string text;
};

struct ReportPlot {
  int width = 640;
  int height = 40;
  std::vector<PlotRect> rects;
  std::vector<PlotText> texts;
};

/// The plot of BuildJobReport's JSON (job_report.h): 40 px of heading, then a 220 px panel for the task accuracies
/// (when a task has acc) and one per Δp histogram.
ReportPlot LayoutReportPlot(const nlohmann::json& report);

}  // namespace quark::client
