// A 3x5 pixel font for the PNG plot's labels (png_image.h): digits, lower-case letters (upper case is drawn as
// lower case), the punctuation the report's labels use and Δ; anything else is drawn as a hollow box.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace quark::client {

inline constexpr int kGlyphWidth = 3;
inline constexpr int kGlyphHeight = 5;

/// The glyph of Unicode code point `cp`: kGlyphHeight rows of kGlyphWidth characters, '#' for an inked pixel.
const char* GlyphOf(char32_t cp);

/// The code points of UTF-8 `text`; a malformed byte becomes U+FFFD.
std::vector<char32_t> DecodeUtf8(const std::string& text);

}  // namespace quark::client
