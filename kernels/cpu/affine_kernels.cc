#include "kernels/cpu/affine_kernels.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/lanes_io.h"

#include "kernels/cpu/scalar_convert.h"

namespace quark::kernels {
namespace {

// The rounded, clamped integer of one element, as float32. Pre-clamping to one past the range keeps the rounding
// trick valid (|v| <= 2^22) without changing the result.
inline float QuantizeOne(float x, float inv, float z, const AffineArgs& a) {
  const float qmin = static_cast<float>(a.qmin);
  const float qmax = static_cast<float>(a.qmax);
  if (a.float_zero_point) {
    const float v = ClampKeepNan(x * inv + z, qmin - 1.0f, qmax + 1.0f);
    return ClampKeepNan(RoundSmall(v, a.round), qmin, qmax);
  }
  const float v = ClampKeepNan(x * inv, qmin - z - 1.0f, qmax - z + 1.0f);
  return ClampKeepNan(RoundSmall(v, a.round) + z, qmin, qmax);
}

// The codes of an affine tensor, with the rounding mode fixed at compile time: read from the arguments inside the
// loops, it kept GCC from vectorizing them (13% of a 7B-shaped uint4 RTN export's time went to this scalar loop).
// The loops read only locals: a store through a (u)int8 pointer may alias anything, so a bound or parameter read
// through a reference would be reloaded after every store and the loop left scalar.
template <RoundMode kMode, typename T, typename Q>
void QuantizeRunWith(const T* x, Q* q, int64_t n, float inv, float z, float qmin, float qmax) {
  for (int64_t i = 0; i < n; ++i) {
    q[i] = static_cast<Q>(static_cast<int>(element::AffineRealCode<static_cast<int>(kMode)>(ToF32(x[i]), inv, z, qmin, qmax)));
  }
}

template <RoundMode kMode, typename T, typename Q>
void QuantizeColumnsWith(const T* x, Q* q, int64_t n, const float* scale, const float* zero_point, float qmin,
                         float qmax) {
  for (int64_t j = 0; j < n; ++j) {
    q[j] = static_cast<Q>(static_cast<int>(element::AffineRealCode<static_cast<int>(kMode)>(
                                                           ToF32(x[j]), 1.0f / scale[j], zero_point[j], qmin, qmax)));
  }
}

template <RoundMode kMode, typename T, typename Q>
void QuantizeAffineWith(const T* x, Q* q, const ChannelLayout& layout, const AffineArgs& a) {
  const float qmin = static_cast<float>(a.qmin);
  const float qmax = static_cast<float>(a.qmax);
  const float* scale = a.scale;
  const float* zero_point = a.zero_point;
  const int64_t channels = layout.channels;
  ForEachChannelRun(
      layout,
      [&](int64_t b, int64_t e, int64_t c) {
        QuantizeRunWith<kMode>(x + b, q + b, e - b, 1.0f / scale[c], zero_point[c], qmin, qmax);
      },
      [&](int64_t row) { QuantizeColumnsWith<kMode>(x + row, q + row, channels, scale, zero_point, qmin, qmax); });
}

}  // namespace

float FakeQuantAffineRef(float x, float scale, float zero_point, const AffineArgs& args) {
  const float inv = 1.0f / scale;
  auto round = [&](float v) {
    switch (args.round) {
      case RoundMode::kHalfEven:
        return std::nearbyint(v);
      case RoundMode::kHalfAway:
        return std::round(v);
      case RoundMode::kFloor:
        return std::floor(v);
    }
    return v;
  };
  if (std::isnan(x)) return x;
  const float lo = static_cast<float>(args.qmin);
  const float hi = static_cast<float>(args.qmax);
  const float q = args.float_zero_point ? std::fmin(std::fmax(round(x * inv + zero_point), lo), hi)
                                        : std::fmin(std::fmax(round(x * inv) + zero_point, lo), hi);
  return (q - zero_point) * scale;
}

template <typename T>
void FakeQuantAffine(const T* x, T* y, const ChannelLayout& layout, const AffineArgs& args) {
  const LaneIo io = LaneIoFor(layout.Numel(), sizeof(T));
  const LaneTable& t = io.t();
  const int mode = static_cast<int>(args.round);
  const int fz = args.float_zero_point ? 1 : 0;
  const float qmin = static_cast<float>(args.qmin);
  const float qmax = static_cast<float>(args.qmax);
  const float* scale = args.scale;
  const float* zero_point = args.zero_point;
  // float32 reciprocals, computed once per channel.
  std::vector<float> inv(static_cast<size_t>(layout.channels));
  for (int64_t c = 0; c < layout.channels; ++c) inv[c] = 1.0f / scale[c];
  const auto run = t.affine_run[mode][fz];
  const auto cols = t.affine_cols[mode][fz];
  const auto groups = t.affine_groups[mode][fz];
  const auto run16 = t.bf16.affine_run[mode][fz];
  const auto groups16 = t.bf16.affine_groups[mode][fz];
  const int64_t g = layout.inner;
  if (ForEachGroupSpan(layout, [&](int64_t start, int64_t end) {
        const int64_t c = start / g;
        QuantizeChunks(
            x, y, start, end, io,
            [&](const uint16_t* in, uint16_t* out, int64_t n) {
              groups16(in, out, n, g, scale + c, inv.data() + c, zero_point + c, qmin, qmax);
            },
            [&](float* v, int64_t n) { groups(v, n, g, scale + c, inv.data() + c, zero_point + c, qmin, qmax); });
      })) {
    return;
  }
  ForEachChannelRun(
      layout,
      [&](int64_t b, int64_t e, int64_t c) {
        const float s = scale[c];
        const float z = zero_point[c];
        const float r = inv[c];
        QuantizeChunks(
            x, y, b, e, io, [&](const uint16_t* in, uint16_t* out, int64_t n) { run16(in, out, n, s, r, z, qmin, qmax); },
            [&](float* v, int64_t n) { run(v, n, s, r, z, qmin, qmax); });
      },
      [&](int64_t row) {
        ForEachChunk(x, y, row, row + layout.channels, io, [&](float* v, int64_t n, int64_t off) {
          const int64_t j = off - row;
          cols(v, n, scale + j, inv.data() + j, zero_point + j, qmin, qmax);
        });
      });
}

void FakeQuantAffineRow(const float* x, float* y, int64_t n, const float* inv, bool per_element,
                        const AffineArgs& args) {
  const LaneTable& t = LaneOpsForThisCpu();
  const int mode = static_cast<int>(args.round);
  const int fz = args.float_zero_point ? 1 : 0;
  const float qmin = static_cast<float>(args.qmin);
  const float qmax = static_cast<float>(args.qmax);
  if (x != y) std::memcpy(y, x, sizeof(float) * static_cast<size_t>(n));
  if (per_element) {
    t.affine_cols[mode][fz](y, n, args.scale, inv, args.zero_point, qmin, qmax);
  } else {
    t.affine_run[mode][fz](y, n, args.scale[0], inv[0], args.zero_point[0], qmin, qmax);
  }
}

template <typename T, typename Q>
void QuantizeAffine(const T* x, Q* q, const ChannelLayout& layout, const AffineArgs& args) {
  switch (args.round) {
    case RoundMode::kHalfEven:
      return QuantizeAffineWith<RoundMode::kHalfEven>(x, q, layout, args);
    case RoundMode::kHalfAway:
      return QuantizeAffineWith<RoundMode::kHalfAway>(x, q, layout, args);
    case RoundMode::kFloor:
      return QuantizeAffineWith<RoundMode::kFloor>(x, q, layout, args);
  }
}

template <typename Q, typename T>
void DequantizeAffine(const Q* q, T* y, const ChannelLayout& layout, const AffineArgs& args) {
  const AffineArgs a = args;
  ForEachChannelRun(
      layout,
      [&](int64_t b, int64_t e, int64_t c) {
        const float s = a.scale[c];
        const float z = a.zero_point[c];
        for (int64_t i = b; i < e; ++i) y[i] = FromF32<T>((static_cast<float>(q[i]) - z) * s);
      },
      [&](int64_t row) {
        for (int64_t j = 0; j < layout.channels; ++j) {
          y[row + j] = FromF32<T>((static_cast<float>(q[row + j]) - a.zero_point[j]) * a.scale[j]);
        }
      });
}

#define QUARK_INSTANTIATE_AFFINE(T)                                                                        \
  template void FakeQuantAffine<T>(const T*, T*, const ChannelLayout&, const AffineArgs&);                 \
  template void QuantizeAffine<T, int8_t>(const T*, int8_t*, const ChannelLayout&, const AffineArgs&);     \
  template void QuantizeAffine<T, uint8_t>(const T*, uint8_t*, const ChannelLayout&, const AffineArgs&);   \
  template void DequantizeAffine<int8_t, T>(const int8_t*, T*, const ChannelLayout&, const AffineArgs&);   \
  template void DequantizeAffine<uint8_t, T>(const uint8_t*, T*, const ChannelLayout&, const AffineArgs&);

QUARK_INSTANTIATE_AFFINE(float)
QUARK_INSTANTIATE_AFFINE(c10::BFloat16)
QUARK_INSTANTIATE_AFFINE(c10::Half)
#undef QUARK_INSTANTIATE_AFFINE

}  // namespace quark::kernels
