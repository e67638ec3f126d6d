// quarkctl report's PNG plot (client/png_image.h): the encoder's bytes decode — by a decoder written here on zlib,
// checking every chunk's CRC, and by sharp (libvips, npm) — to the image's size and pixels; the report's bars land at
// the places and in the colours the layout gives them (the same as the SVG's rects).
#include "client/png_image.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/job_report.h"
#include "client/plot_font.h"
#include "tests/storage/support/subprocess.h"
#include "tests/support/require_peer.h"

namespace quark::client {
namespace {

uint32_t U32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

// PNG (8-bit RGB, filter 0 rows, no interlace, as EncodePng promises) back to pixels; fails the test on anything
// else: a bad signature, a chunk whose CRC does not match, an IHDR other than 8-bit RGB, a row filter other than 0.
RgbImage DecodeRgbPng(const std::string& png) {
  RgbImage image(0, 0);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::string idat;
  bool ended = false;
  for (size_t at = 8; at + 12 <= png.size() && !ended;) {
    const uint32_t length = U32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const std::string data = png.substr(at + 8, length);
    const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(png.data() + at + 4), length + 4);
    EXPECT_EQ(U32(png, at + 8 + length), crc) << type << " chunk's CRC";
    if (type == "IHDR") {
      image = RgbImage(static_cast<int>(U32(data, 0)), static_cast<int>(U32(data, 4)));
      EXPECT_EQ(data.substr(8), std::string({8, 2, 0, 0, 0})) << "8-bit RGB, deflate, no interlace";
    } else if (type == "IDAT") {
      idat += data;
    }
    ended = type == "IEND";
    at += 12 + length;
  }
  EXPECT_TRUE(ended) << "no IEND";
  const size_t row = 3ull * image.width;
  std::string raw((row + 1) * image.height, '\0');
  uLongf raw_size = raw.size();
  EXPECT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size,
                       reinterpret_cast<const Bytef*>(idat.data()), idat.size()),
            Z_OK);
  EXPECT_EQ(raw_size, raw.size());
  for (int y = 0; y < image.height; ++y) {
    EXPECT_EQ(raw[(row + 1) * y], '\0') << "row " << y << "'s filter";
    std::copy_n(raw.data() + (row + 1) * y + 1, row, image.pixels.data() + row * y);
  }
  return image;
}

// A pattern no two neighbours share, so that a swapped row, column or channel shows.
RgbImage Pattern(int width, int height) {
  RgbImage image(width, height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) image.Set(x, y, static_cast<uint32_t>((x * 37 + y * 101) * 2654435761u) >> 8);
  }
  return image;
}

TEST(ReportPngTest, EncodedImagesDecodeToTheirPixels) {
  for (const auto& [w, h] : {std::pair{1, 1}, {17, 5}, {5, 17}, {1025, 3}}) {
    const RgbImage image = Pattern(w, h);
    const RgbImage back = DecodeRgbPng(EncodePng(image));
    EXPECT_EQ(back.width, w);
    EXPECT_EQ(back.height, h);
    EXPECT_EQ(back.pixels, image.pixels) << w << "x" << h;
  }
  EXPECT_EQ(EncodePng(RgbImage(0, 3)), "");
}

// One task (acc 0.5 float, 0.25 reloaded) and one Δp histogram of four bins.
nlohmann::json SmallReport() {
  return {{"job", "j1"},
          {"tasks", {{"arc_easy", {{"acc", {{"float", 0.5}, {"reloaded", 0.25}}}}}}},
          {"delta_p_histogram", {{"reloaded", {{"lo", -1}, {"hi", 1}, {"counts", {0, 3, 1, 0}}}}}}};
}

// Pixels of the small report, worked out by hand from the layout's rules (640 wide, 40 px heading, panels of 220):
// tasks: a group of 580 px from x = 40, bars 580/3 wide drawn 0.9 of that, 160 px for acc 1 above y = 230;
// histogram: bins 145 px wide from x = 40, the tallest 170 px above y = 460.
struct Probe {
  int x, y;
  uint32_t rgb;
  const char* what;
};
constexpr Probe kProbes[] = {
    {127, 190, 0x4c72b0, "float's bar (x 40..214, y 150..230)"},
    {127, 149, 0xffffff, "just above float's bar"},
    {320, 210, 0xdd8452, "reloaded's bar (x 233..407, y 190..230)"},
    {320, 170, 0xffffff, "above reloaded's bar"},
    {220, 200, 0xffffff, "the gap between the bars"},
    {100, 455, 0xffffff, "the empty first bin"},
    {250, 291, 0x4c72b0, "the tallest bin (x 185..315, y 290..460)"},
    {250, 289, 0xffffff, "just above the tallest bin"},
    {400, 440, 0x4c72b0, "the third bin (a third as tall: y 403.3..460)"},
    {400, 400, 0xffffff, "above the third bin"},
    {39, 459, 0xffffff, "left of the first bin"},
};

TEST(ReportPngTest, TheReportsBarsLandWhereTheLayoutPutsThem) {
  const RgbImage image = DecodeRgbPng(ReportPng(SmallReport()));
  ASSERT_EQ(image.width, 640);
  ASSERT_EQ(image.height, 40 + 220 * 2);
  for (const Probe& p : kProbes) {
    EXPECT_EQ(image.At(p.x, p.y), p.rgb) << p.what << absl::StrFormat(": #%06x", image.At(p.x, p.y));
  }
  // The SVG draws the same rectangles.
  EXPECT_NE(ReportSvg(SmallReport()).find("<rect x=\"233.3\" y=\"190.0\" width=\"174.0\" height=\"40.0\" "
                                          "fill=\"#dd8452\"><title>arc_easy reloaded 0.2500</title></rect>"),
            std::string::npos)
      << ReportSvg(SmallReport());
}

TEST(ReportPngTest, LabelsAreDrawnInTheFont) {
  ReportPlot plot;
  plot.width = 12;
  plot.height = 7;
  plot.texts.push_back({1, 6, 9, "1Δ"});  // baseline at y = 6: glyph rows 1..5
  const RgbImage image = RasterisePlot(plot);
  for (int c = 0; c < 2; ++c) {
    const char* glyph = GlyphOf(DecodeUtf8("1Δ")[c]);
    for (int r = 0; r < kGlyphHeight; ++r) {
      for (int x = 0; x < kGlyphWidth; ++x) {
        const uint32_t want = glyph[r * kGlyphWidth + x] == '#' ? 0x000000 : 0xffffff;
        EXPECT_EQ(image.At(1 + c * 4 + x, 1 + r), want) << "glyph " << c << " row " << r << " column " << x;
      }
    }
  }
  EXPECT_EQ(image.At(0, 0), 0xffffffu);
  EXPECT_EQ(DecodeUtf8("a\xff"), (std::vector<char32_t>{U'a', U'\uFFFD'}));
}

TEST(ReportPngTest, SharpDecodesThePlotToTheSamePixels) {
  const std::filesystem::path modules = quark::testing::NodeModulesDir();
  if (modules.empty() || !std::filesystem::exists(modules / "sharp")) {
    QUARK_PEER_MISSING() << "npm sharp is not installed under tests/peers (scripts/install-test-peers.sh)";
  }
  quark::testing::TempDir dir;
  const std::filesystem::path file = dir.path() / "report.png";
  quark::testing::WriteFile(file, ReportPng(SmallReport()));
  const std::filesystem::path script = modules.parent_path().parent_path() / "node" / "png_pixels.cjs";
  std::string command = absl::StrCat("node ", script.string(), " ", file.string());
  for (const Probe& p : kProbes) absl::StrAppend(&command, " ", p.x, ",", p.y);
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) QUARK_PEER_MISSING() << output;
  ASSERT_EQ(status, 0) << command << "\n" << output;
  const nlohmann::json decoded = nlohmann::json::parse(output);
  EXPECT_EQ(decoded["format"], "png");
  EXPECT_EQ(decoded["width"], 640);
  EXPECT_EQ(decoded["height"], 480);
  EXPECT_EQ(decoded["channels"], 3);
  for (size_t i = 0; i < std::size(kProbes); ++i) {
    EXPECT_EQ(decoded["pixels"][i], absl::StrFormat("#%06x", kProbes[i].rgb)) << kProbes[i].what;
  }
}

}  // namespace
}  // namespace quark::client
