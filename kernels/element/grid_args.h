// The grid constants of a small float format (fp8 / fp6 / fp4) as the per-element math needs them. Plain data, the
// same on the host and on a GPU.
#pragma once

namespace quark::kernels {

struct GridArgs {
  int mbits = 0;     // mantissa bits
  int emin = 0;      // exponent of the smallest normal
  float max = 0.0f;  // largest finite value
};

/// What encoding a grid value into its code needs besides GridArgs.
struct GridCodeArgs {
  int ebits = 0;
  int mbits = 0;
  int emin = 0;
  bool has_nan = false;
  unsigned char nan_code = 0;  // code of NaN without its sign bit (fp8 formats; fp6/fp4 have none and write +0)
};

}  // namespace quark::kernels
