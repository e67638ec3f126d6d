#include "kernels/cpu/mx_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/float_grid.h"
#include "kernels/cpu/lanes_io.h"
#include "kernels/cpu/scalar_convert.h"

namespace quark::kernels {
namespace {

// Mantissa bits and largest exponent of the element type; MXINT8 is a 1.6 fixed-point number (emax 0).
struct MxElement {
  int mbits;
  int emax;
  bool is_int;
  GridConsts grid;
};

MxElement ElementOf(const MxArgs& args) {
  if (args.element == ElemFormat::kInt8) return MxElement{6, 0, true, GridConsts{}};
  const FormatTraits& t = Traits(args.element);
  return MxElement{t.mbits, t.emax, false, MakeGrid(t)};
}

int SharedExponent(float amax, const MxElement& el, MxScaleMode mode) {
  return element::MxSharedExponent(amax, el.mbits, el.emax, static_cast<int>(mode));
}

template <typename T>
float BlockAmax(const T* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(ToF32(x[i]));
    m = a > m ? a : m;
  }
  return m;
}

// x / 2^(e - shift), as the element's value; k = shift - e.
inline float ElementValue(float x, int k, const MxElement& el, RoundMode round) {
  const float v = ScaleByPow2(x, k);
  if (el.is_int) return ClampKeepNan(RoundSmall(ClampKeepNan(v, -128.0f, 128.0f), round), -127.0f, 127.0f);
  return RoundToGridSaturate(v, el.grid);
}

template <typename Body>
void ForEachBlock(int64_t rows, int64_t len, Body body) {
  const int64_t nb = MxBlocksPerRow(len);
  at::parallel_for(0, rows * nb, std::max<int64_t>(1, 32768 / kMxBlock), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t r = k / nb;
      const int64_t start = (k % nb) * kMxBlock;
      body(k, r * len + start, std::min(kMxBlock, len - start));
    }
  });
}

// Element values are x / 2^e (MXINT8: x / 2^(e-6)); both scalings are exact powers of two.
int ElementShift(const MxElement& el) { return el.is_int ? 6 : 0; }

}  // namespace

int MxSharedExponent(float amax, const MxArgs& args) { return SharedExponent(amax, ElementOf(args), args.mode); }

template <typename T>
void MxBlockExponents(const T* x, int64_t rows, int64_t len, const MxArgs& args, int8_t* exps) {
  const MxElement el = ElementOf(args);
  ForEachBlock(rows, len, [&](int64_t k, int64_t off, int64_t n) {
    exps[k] = static_cast<int8_t>(SharedExponent(BlockAmax(x + off, n), el, args.mode));
  });
}

template <typename T>
void MxFakeQuant(const T* x, T* y, int64_t rows, int64_t len, const MxArgs& args, const int8_t* exps) {
  const MxElement el = ElementOf(args);
  const int shift = ElementShift(el);
  const LaneIo io = LaneIoFor(rows * len, sizeof(T));
  const LaneTable& t = io.t();
  const GridArgs g{el.grid.mbits, el.grid.emin, el.grid.max};
  const auto mx_int = t.mx_int[static_cast<int>(args.round)];
  const auto mx_int16 = t.bf16.mx_int[static_cast<int>(args.round)];
  const int64_t nb = MxBlocksPerRow(len);
  // Parallel over rows; long rows are split into chunks of whole blocks.
  const int64_t chunks_per_row = (len + kLanes - 1) / kLanes;
  at::parallel_for(0, rows * chunks_per_row, std::max<int64_t>(1, 32768 / kLanes), [&](int64_t b, int64_t e) {
    alignas(64) float amax[kLanes / kMxBlock];
    alignas(64) float inv[kLanes / kMxBlock];
    alignas(64) float scale[kLanes / kMxBlock];
    bool prescaled[kLanes / kMxBlock];
    alignas(64) float lanes[kLanes];
    for (int64_t k = b; k < e; ++k) {
      const int64_t r = k / chunks_per_row;
      const int64_t start = (k % chunks_per_row) * kLanes;
      const int64_t end = std::min(len, start + kLanes);
      // Block multipliers of the chunk, from the given exponents or from the chunk's block amax. Returns whether
      // a block needs the exact two-step scaling (ScaleByPow2): then `prescaled` marks those blocks.
      auto block_params = [&](int64_t n) {
        const int64_t blocks = (n + kMxBlock - 1) / kMxBlock;
        bool any = false;
        for (int64_t j = 0; j < blocks; ++j) {
          const int ex = exps ? exps[r * nb + start / kMxBlock + j] : SharedExponent(amax[j], el, args.mode);
          const int k = shift - ex;
          prescaled[j] = k > 127;
          any = any || prescaled[j];
          inv[j] = Pow2(prescaled[j] ? k - kMxPrescaleExp : k);
          scale[j] = Pow2(ex - shift);
        }
        return any;
      };
      // The float32-buffer route, for float32 / float16 data and for chunks with prescaled blocks.
      auto quantize_lanes = [&](float* v, int64_t n, bool any_prescaled) {
        if (any_prescaled) {
          const float up = Pow2(kMxPrescaleExp);
          for (int64_t i = 0; i < n; ++i) v[i] = prescaled[i / kMxBlock] ? v[i] * up : v[i];
        }
        if (el.is_int) {
          mx_int(v, n, inv, scale);
        } else {
          t.mx_grid(v, n, inv, scale, g);
        }
      };
      QuantizeChunks(
          x, y, r * len + start, r * len + end, io,
          [&](const uint16_t* in, uint16_t* out, int64_t n) {
            if (!exps) t.bf16.block_amax(in, n, amax);
            if (block_params(n)) {  // rare: through the float32 buffer
              t.load_bf16(in, lanes, n);
              quantize_lanes(lanes, n, true);
              t.store_bf16(lanes, out, n);
            } else if (el.is_int) {
              mx_int16(in, out, n, inv, scale);
            } else {
              t.bf16.mx_grid(in, out, n, inv, scale, g);
            }
          },
          [&](float* v, int64_t n) {
            if (!exps) t.block_amax(v, n, amax);
            quantize_lanes(v, n, block_params(n));
          });
    }
  });
}

template <typename T>
void MxQuantize(const T* x, uint8_t* codes, uint8_t* e8m0, int64_t rows, int64_t len, const MxArgs& args) {
  const MxElement el = ElementOf(args);
  const int shift = ElementShift(el);
  ForEachBlock(rows, len, [&](int64_t k, int64_t off, int64_t n) {
    const int e = SharedExponent(BlockAmax(x + off, n), el, args.mode);
    e8m0[k] = static_cast<uint8_t>(e + 127);
    for (int64_t i = 0; i < n; ++i) {
      const float v = ElementValue(ToF32(x[off + i]), shift - e, el, args.round);
      // MXINT8 has no NaN code: a NaN element is written as 0.
      codes[off + i] = el.is_int ? static_cast<uint8_t>(static_cast<int8_t>(std::isnan(v) ? 0 : static_cast<int>(v)))
                                 : EncodeGridValue(v, el.grid);
    }
  });
}

template <typename T>
void MxDequantize(const uint8_t* codes, const uint8_t* e8m0, T* y, int64_t rows, int64_t len, const MxArgs& args) {
  const MxElement el = ElementOf(args);
  const int shift = ElementShift(el);
  const float* table = el.is_int ? nullptr : DecodeTable(args.element);
  ForEachBlock(rows, len, [&](int64_t k, int64_t off, int64_t n) {
    const float s = Pow2(static_cast<int>(e8m0[k]) - 127 - shift);
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t c = codes[off + i];
      const float v = el.is_int ? static_cast<float>(static_cast<int8_t>(c)) : table[c];
      y[off + i] = FromF32<T>(v * s);
    }
  });
}

void MxFakeQuantBlockRef(const float* x, float* y, int n, const MxArgs& args) {
  const MxElement el = ElementOf(args);
  double amax = 0.0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
  int e;
  if (amax == 0.0) {
    e = -126;
  } else {
    int fe = 0;
    const double f = std::frexp(amax, &fe);  // amax = f * 2^fe, floor(log2 amax) = fe - 1
    int lg = fe - 1;
    if (args.mode == MxScaleMode::kEven) {
      // Rounds amax to mbits + 1 significant bits (half up): a carry means one binade up.
      const double scaled = std::ldexp(2.0 * f, el.mbits);
      if (std::floor(scaled + 0.5) >= std::ldexp(1.0, el.mbits + 1)) lg += 1;
    } else if (args.mode == MxScaleMode::kCeil && 2.0 * f != 1.0) {
      lg += 1;
    }
    e = std::clamp(lg - el.emax, -127, 127);
  }
  const double s = std::ldexp(1.0, e);
  for (int i = 0; i < n; ++i) {
    if (el.is_int) {
      // floor / round / nearbyint keep the sign of zero: a negative element that rounds to zero gives -0, as AMD
      // Quark's torch.round(x / scale) * scale does.
      const double v = static_cast<double>(x[i]) / (s / 64.0);
      double r = args.round == RoundMode::kFloor      ? std::floor(v)
                 : args.round == RoundMode::kHalfAway ? std::round(v)
                                                      : std::nearbyint(v);
      r = std::clamp(r, -127.0, 127.0);
      y[i] = static_cast<float>(r * (s / 64.0));
    } else {
      const float v = static_cast<float>(static_cast<double>(x[i]) / s);
      y[i] = static_cast<float>(static_cast<double>(Traits(args.element).round_ref(v)) * s);
    }
  }
}

#define QUARK_INSTANTIATE_MX(T)                                                                                \
  template void MxBlockExponents<T>(const T*, int64_t, int64_t, const MxArgs&, int8_t*);                        \
  template void MxFakeQuant<T>(const T*, T*, int64_t, int64_t, const MxArgs&, const int8_t*);                   \
  template void MxQuantize<T>(const T*, uint8_t*, uint8_t*, int64_t, int64_t, const MxArgs&);                   \
  template void MxDequantize<T>(const uint8_t*, const uint8_t*, T*, int64_t, int64_t, const MxArgs&);

QUARK_INSTANTIATE_MX(float)
QUARK_INSTANTIATE_MX(c10::BFloat16)
QUARK_INSTANTIATE_MX(c10::Half)
#undef QUARK_INSTANTIATE_MX

}  // namespace quark::kernels
