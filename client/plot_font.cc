#include "client/plot_font.h"

#include <cctype>

namespace quark::client {
namespace {

struct Glyph {
  char32_t cp;
  const char* rows;  // 5 rows of 3, top to bottom
};

// Drawn for this project, a row of three pixels per group of three characters.
constexpr Glyph kGlyphs[] = {
    {U'0', "####.##.##.####"}, {U'1', ".#.##..#..#.###"}, {U'2', "###..#####..###"}, {U'3', "###..#.##..####"},
    {U'4', "#.##.####..#..#"}, {U'5', "####..###..####"}, {U'6', "####..####.####"}, {U'7', "###..#..#..#..#"},
    {U'8', "####.#####.####"}, {U'9', "####.####..####"}, {U'a', ".#.#.#####.##.#"},  {U'b', "##.#.###.#.###."},
    {U'c', ".###..#..#...##"}, {U'd', "##.#.##.##.###."}, {U'e', "####..##.#..###"}, {U'f', "####..##.#..#.."},
    {U'g', ".###..#.##.#.##"}, {U'h', "#.##.#####.##.#"},  {U'i', "###.#..#..#.###"}, {U'j', "..#..#..##.#.#."},
    {U'k', "#.##.###.#.##.#"}, {U'l', "#..#..#..#..###"}, {U'm', "#.########.##.#"},  {U'n', "##.#.##.##.##.#"},
    {U'o', ".#.#.##.##.#.#."}, {U'p', "##.#.###.#..#.."}, {U'q', ".#.#.##.####.##"}, {U'r', "##.#.###.#.##.#"},
    {U's', ".###...#...###."}, {U't', "###.#..#..#..#."}, {U'u', "#.##.##.##.####"}, {U'v', "#.##.##.##.#.#."},
    {U'w', "#.##.########.#"},  {U'x', "#.##.#.#.#.##.#"}, {U'y', "#.##.#.#..#..#."}, {U'z', "###..#.#.#..###"},
    {U' ', "..............."}, {U'.', ".............#."}, {U',', "..........#.#.."}, {U'-', "......###......"},
    {U'+', "....#.###.#...."}, {U'_', "............###"}, {U'(', "..#.#..#..#...#"}, {U')', "#...#..#..#.#.."},
    {U':', "....#.....#...."}, {U'/', "..#..#.#.#..#.."}, {U'=', "...###...###..."}, {U'%', "#.#..#.#.#..#.#"},
    {U'Δ', "....#.#.##.####"},
};
constexpr const char* kUnknown = "####.##.##.####";

constexpr bool EveryGlyphIsComplete() {
  for (const Glyph& g : kGlyphs) {
    int n = 0;
    while (g.rows[n] == '.' || g.rows[n] == '#') ++n;
    if (n != kGlyphWidth * kGlyphHeight || g.rows[n] != '\0') return false;
  }
  return true;
}
static_assert(EveryGlyphIsComplete(), "a glyph is not 5 rows of 3 pixels");

}  // namespace

const char* GlyphOf(char32_t cp) {
  if (cp < 0x80) cp = static_cast<char32_t>(std::tolower(static_cast<int>(cp)));
  for (const Glyph& g : kGlyphs) {
    if (g.cp == cp) return g.rows;
  }
  return kUnknown;
}

std::vector<char32_t> DecodeUtf8(const std::string& text) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
    char32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1f) : extra == 2 ? (c & 0x0f) : (c & 0x07);
    bool ok = extra >= 0 && i + extra < text.size() + (extra == 0 ? 1 : 0);
    for (int k = 1; ok && k <= extra; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      ok = (next & 0xc0) == 0x80;
      cp = (cp << 6) | (next & 0x3f);
    }
    out.push_back(ok ? cp : U'\uFFFD');
    i += ok ? extra + 1 : 1;
  }
  return out;
}

}  // namespace quark::client
