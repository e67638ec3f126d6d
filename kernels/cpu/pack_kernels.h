// Bit packing of element codes for export (numerics.md, "Packing for export"). Codes are bytes holding the
// element's bit pattern in their low bits (signed 4-bit values as two's complement, masked on packing).
#pragma once

#include <array>
#include <cstdint>

namespace quark::kernels {

/// Nibble i (bits 4i..4i+3) of a packed word holds element order[i] of its 8 elements.
using Int4Order = std::array<int, 8>;
inline constexpr Int4Order kInt4Reorder = {0, 2, 4, 6, 1, 3, 5, 7};
inline constexpr Int4Order kInt4Sequential = {0, 1, 2, 3, 4, 5, 6, 7};

/// codes [n] (n % 8 == 0) -> words [n / 8].
void PackInt4(const uint8_t* codes, int64_t n, const Int4Order& order, int32_t* words);
/// words [n / 8] -> codes [n]; `sign_extend` turns nibbles 8..15 into 0xF8..0xFF (int4).
void UnpackInt4(const int32_t* words, int64_t n, const Int4Order& order, bool sign_extend, uint8_t* codes);

/// fp4: two codes per byte, low nibble = even element. codes [n] (n % 2 == 0) -> bytes [n / 2].
void PackFp4(const uint8_t* codes, int64_t n, uint8_t* bytes);
void UnpackFp4(const uint8_t* bytes, int64_t n, uint8_t* codes);

/// fp6: four codes in three bytes, little-endian bit stream (code k at bits 6k..6k+5 of the 24-bit group).
/// codes [n] (n % 4 == 0) -> bytes [n * 3 / 4].
void PackFp6(const uint8_t* codes, int64_t n, uint8_t* bytes);
void UnpackFp6(const uint8_t* bytes, int64_t n, uint8_t* codes);

}  // namespace quark::kernels
