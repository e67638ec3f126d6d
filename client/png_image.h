// The report's plot as a PNG (`quarkctl report JOB --png FILE`): the shapes of LayoutReportPlot (report_plot.h)
// rasterised into an 8-bit RGB image, with its text in a 3x5 pixel font (plot_font.h), and that image encoded as
// PNG by zlib. No other dependency.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/report_plot.h"

namespace quark::client {

/// Row-major 8-bit RGB pixels, [height][width][3]; white when made.
struct RgbImage {
  RgbImage(int width, int height) : width(width), height(height), pixels(3ull * width * height, 0xff) {}
  /// Colour of pixel (x, y) as 0xRRGGBB; (x, y) must lie inside.
  uint32_t At(int x, int y) const;
  /// Sets (x, y) to `rgb`; outside the image: nothing.
  void Set(int x, int y, uint32_t rgb);

  int width;
  int height;
  std::vector<uint8_t> pixels;
};

/// PNG file bytes of `image`: IHDR (8-bit truecolour, no interlace), one IDAT (every row filter 0, zlib level 9),
/// IEND, each chunk with its CRC-32. An image with no pixels gives "" (PNG has no empty images).
std::string EncodePng(const RgbImage& image);

/// `plot` drawn on white: a rectangle fills the pixels whose centres it covers (as an SVG renderer without
/// anti-aliasing does), then each text in black (size 12 px and more at twice the font's scale).
RgbImage RasterisePlot(const ReportPlot& plot);

/// EncodePng(RasterisePlot(LayoutReportPlot(report))): the same bars as ReportSvg.
std::string ReportPng(const nlohmann::json& report);

}  // namespace quark::client
