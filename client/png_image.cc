#include "client/png_image.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>

#include "client/plot_font.h"

namespace quark::client {
namespace {

constexpr uint32_t kTextColor = 0x000000;

void AppendU32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

// length, type, data, CRC-32 of type + data (PNG 1.2, section 5.3).
void AppendChunk(std::string& out, const char type[4], const std::string& data) {
  AppendU32(out, static_cast<uint32_t>(data.size()));
  const size_t start = out.size();
  out.append(type, 4);
  out += data;
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(out.data() + start), static_cast<uInt>(out.size() - start));
  AppendU32(out, static_cast<uint32_t>(crc));
}

// The pixels whose centres (i + 0.5) lie in [from, to).
std::pair<int, int> CoveredRange(double from, double to, int limit) {
  const int first = std::max(0, static_cast<int>(std::ceil(from - 0.5)));
  const int end = std::min(limit, static_cast<int>(std::ceil(to - 0.5)));
  return {first, end};
}

void DrawText(const PlotText& text, RgbImage& image) {
  const int scale = text.size >= 12 ? 2 : 1;
  int x = static_cast<int>(std::lround(text.x));
  const int top = static_cast<int>(std::lround(text.y)) - kGlyphHeight * scale;
  for (char32_t cp : DecodeUtf8(text.text)) {
    const char* rows = GlyphOf(cp);
    for (int r = 0; r < kGlyphHeight; ++r) {
      for (int c = 0; c < kGlyphWidth; ++c) {
        if (rows[r * kGlyphWidth + c] != '#') continue;
        for (int dy = 0; dy < scale; ++dy) {
          for (int dx = 0; dx < scale; ++dx) image.Set(x + c * scale + dx, top + r * scale + dy, kTextColor);
        }
      }
    }
    x += (kGlyphWidth + 1) * scale;
  }
}

}  // namespace

uint32_t RgbImage::At(int x, int y) const {
  const size_t i = 3 * (static_cast<size_t>(y) * width + x);
  return (uint32_t{pixels[i]} << 16) | (uint32_t{pixels[i + 1]} << 8) | pixels[i + 2];
}

void RgbImage::Set(int x, int y, uint32_t rgb) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  const size_t i = 3 * (static_cast<size_t>(y) * width + x);
  pixels[i] = static_cast<uint8_t>(rgb >> 16);
  pixels[i + 1] = static_cast<uint8_t>(rgb >> 8);
  pixels[i + 2] = static_cast<uint8_t>(rgb);
}

std::string EncodePng(const RgbImage& image) {
  if (image.width <= 0 || image.height <= 0) return "";
  const size_t row = 3ull * image.width;
  std::string raw;
  raw.reserve((row + 1) * image.height);
  for (int y = 0; y < image.height; ++y) {
    raw.push_back('\0');  // filter type 0: the row as it is
    raw.append(reinterpret_cast<const char*>(image.pixels.data() + row * y), row);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_size, reinterpret_cast<const Bytef*>(raw.data()),
                static_cast<uLong>(raw.size()), 9) != Z_OK) {
    return "";  // only Z_MEM_ERROR can happen with a bound-sized buffer
  }
  packed.resize(packed_size);
  std::string header;
  AppendU32(header, static_cast<uint32_t>(image.width));
  AppendU32(header, static_cast<uint32_t>(image.height));
  header += std::string{8, 2, 0, 0, 0};  // bit depth 8, colour type 2 (RGB), deflate, adaptive filtering, no interlace
  std::string png("\x89PNG\r\n\x1a\n", 8);
  AppendChunk(png, "IHDR", header);
  AppendChunk(png, "IDAT", packed);
  AppendChunk(png, "IEND", "");
  return png;
}

RgbImage RasterisePlot(const ReportPlot& plot) {
  RgbImage image(plot.width, plot.height);
  for (const PlotRect& r : plot.rects) {
    const auto [x0, x1] = CoveredRange(r.x, r.x + r.w, image.width);
    const auto [y0, y1] = CoveredRange(r.y, r.y + r.h, image.height);
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) image.Set(x, y, r.rgb);
    }
  }
  for (const PlotText& t : plot.texts) DrawText(t, image);
  return image;
}

std::string ReportPng(const nlohmann::json& report) { return EncodePng(RasterisePlot(LayoutReportPlot(report))); }

}  // namespace quark::client
