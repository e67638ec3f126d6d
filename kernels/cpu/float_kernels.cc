#include "kernels/cpu/float_kernels.h"

#include "kernels/cpu/float_grid.h"
#include "kernels/cpu/lanes_io.h"
#include "kernels/cpu/rounding.h"
#include "kernels/cpu/scalar_convert.h"

namespace quark::kernels {
namespace {

inline float ScaledGridValue(float x, float s, const GridConsts& g) {
  return element::ScaledGridValue(x, s, GridArgs{g.mbits, g.emin, g.max});
}

}  // namespace

template <typename T>
void RoundToFormat(const T* x, T* y, int64_t n, ElemFormat format) {
  const GridConsts g = MakeGrid(Traits(format));
  at::parallel_for(0, n, kElementGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = FromF32<T>(RoundToGrid(ToF32(x[i]), g));
  });
}

template <typename T>
void FakeQuantFloat(const T* x, T* y, const ChannelLayout& layout, const float* scale, ElemFormat format) {
  const LaneIo io = LaneIoFor(layout.Numel(), sizeof(T));
  const LaneTable& t = io.t();
  const FormatTraits& tr = Traits(format);
  const GridArgs g{tr.mbits, tr.emin, tr.max};
  const int64_t group = layout.inner;
  if (ForEachGroupSpan(layout, [&](int64_t start, int64_t end) {
        const float* s = scale + start / group;
        QuantizeChunks(
            x, y, start, end, io,
            [&](const uint16_t* in, uint16_t* out, int64_t n) { t.bf16.float_groups(in, out, n, group, s, g); },
            [&](float* v, int64_t n) { t.float_groups(v, n, group, s, g); });
      })) {
    return;
  }
  ForEachChannelRun(
      layout,
      [&](int64_t b, int64_t e, int64_t c) {
        const float s = scale[c];
        QuantizeChunks(
            x, y, b, e, io, [&](const uint16_t* in, uint16_t* out, int64_t n) { t.bf16.float_run(in, out, n, s, g); },
            [&](float* v, int64_t n) { t.float_run(v, n, s, g); });
      },
      [&](int64_t row) {
        ForEachChunk(x, y, row, row + layout.channels, io,
                     [&](float* v, int64_t n, int64_t off) { t.float_cols(v, n, scale + (off - row), g); });
      });
}

template <typename T>
void QuantizeFloat(const T* x, uint8_t* codes, const ChannelLayout& layout, const float* scale, ElemFormat format) {
  const GridConsts g = MakeGrid(Traits(format));
  ForEachChannelRun(
      layout,
      [&](int64_t b, int64_t e, int64_t c) {
        const float s = scale[c];
        for (int64_t i = b; i < e; ++i) codes[i] = EncodeGridValue(ScaledGridValue(ToF32(x[i]), s, g), g);
      },
      [&](int64_t row) {
        for (int64_t j = 0; j < layout.channels; ++j) {
          codes[row + j] = EncodeGridValue(ScaledGridValue(ToF32(x[row + j]), scale[j], g), g);
        }
      });
}

template <typename T>
void DequantizeFloat(const uint8_t* codes, T* y, const ChannelLayout& layout, const float* scale, ElemFormat format) {
  const float* table = DecodeTable(format);
  ForEachChannelRun(
      layout,
      [&](int64_t b, int64_t e, int64_t c) {
        const float s = scale[c];
        for (int64_t i = b; i < e; ++i) y[i] = FromF32<T>(table[codes[i]] * s);
      },
      [&](int64_t row) {
        for (int64_t j = 0; j < layout.channels; ++j) y[row + j] = FromF32<T>(table[codes[row + j]] * scale[j]);
      });
}

void EncodeGridValues(const float* v, uint8_t* codes, int64_t n, ElemFormat format) {
  const GridConsts g = MakeGrid(Traits(format));
  at::parallel_for(0, n, kElementGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) codes[i] = EncodeGridValue(v[i], g);
  });
}

#define QUARK_INSTANTIATE_FLOAT(T)                                                                                \
  template void RoundToFormat<T>(const T*, T*, int64_t, ElemFormat);                                              \
  template void FakeQuantFloat<T>(const T*, T*, const ChannelLayout&, const float*, ElemFormat);                  \
  template void QuantizeFloat<T>(const T*, uint8_t*, const ChannelLayout&, const float*, ElemFormat);             \
  template void DequantizeFloat<T>(const uint8_t*, T*, const ChannelLayout&, const float*, ElemFormat);

QUARK_INSTANTIATE_FLOAT(float)
QUARK_INSTANTIATE_FLOAT(c10::BFloat16)
QUARK_INSTANTIATE_FLOAT(c10::Half)
#undef QUARK_INSTANTIATE_FLOAT

}  // namespace quark::kernels
