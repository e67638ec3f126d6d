#include "kernels/cpu/nvfp4_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/float_grid.h"
#include "kernels/cpu/format_traits.h"
#include "kernels/cpu/scalar_convert.h"

namespace quark::kernels {
namespace {

template <typename T>
float GroupAmax(const T* x) {
  float m = 0.0f;
  for (int64_t i = 0; i < kNvfp4Group; ++i) {
    const float a = std::fabs(ToF32(x[i]));
    m = a > m ? a : m;
  }
  return m;
}

// body(group index, offset of its first element), in parallel over groups.
template <typename Body>
void ForEachGroup(int64_t rows, int64_t len, Body body) {
  const int64_t groups = rows * (len / kNvfp4Group);
  at::parallel_for(0, groups, 2048, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) body(k, k * kNvfp4Group);
  });
}

const GridConsts& Fp4Grid() {
  static const GridConsts g = MakeGrid(Traits(ElemFormat::kFp4E2M1));
  return g;
}

const GridConsts& E4M3Grid() {
  static const GridConsts g = MakeGrid(Traits(ElemFormat::kFp8E4M3));
  return g;
}

}  // namespace

template <typename T>
float Nvfp4Amax(const T* x, int64_t n) {
  return at::parallel_reduce(
      0, n, 1 << 16, 0.0f,
      [&](int64_t b, int64_t e, float m) {
        for (int64_t i = b; i < e; ++i) {
          const float a = std::fabs(ToF32(x[i]));
          m = a > m ? a : m;
        }
        return m;
      },
      [](float a, float b) { return a > b ? a : b; });
}

template <typename T>
void Nvfp4BlockScales(const T* x, int64_t rows, int64_t len, float global, float* blk) {
  ForEachGroup(rows, len, [&](int64_t k, int64_t off) { blk[k] = element::Nvfp4BlockScale(GroupAmax(x + off), global); });
}

template <typename T>
void Nvfp4FakeQuant(const T* x, T* y, int64_t rows, int64_t len, float global, const float* blk) {
  ForEachGroup(rows, len, [&](int64_t k, int64_t off) {
    const float s = blk ? blk[k] : element::Nvfp4BlockScale(GroupAmax(x + off), global);
    for (int64_t i = off; i < off + kNvfp4Group; ++i) {
      y[i] = FromF32<T>(element::Nvfp4Dequant(element::Nvfp4Value(ToF32(x[i]), s, global), s, global));
    }
  });
}

template <typename T>
void Nvfp4FakeQuantColumn(const float* x, float* y, int64_t rows, float global, const float* blk) {
  for (int64_t r = 0; r < rows; ++r) {
    const float v = element::Nvfp4Value(RoundTrip<T>(x[r]), blk[r], global);
    y[r] = RoundTrip<T>(element::Nvfp4Dequant(v, blk[r], global));
  }
}

template <typename T>
void Nvfp4Quantize(const T* x, uint8_t* codes, uint8_t* scale_e4m3, int64_t rows, int64_t len, float global,
                   const float* blk) {
  ForEachGroup(rows, len, [&](int64_t k, int64_t off) {
    const float s = blk ? blk[k] : element::Nvfp4BlockScale(GroupAmax(x + off), global);
    scale_e4m3[k] = EncodeGridValue(s, E4M3Grid());
    for (int64_t i = off; i < off + kNvfp4Group; ++i) {
      codes[i] = EncodeGridValue(element::Nvfp4Value(ToF32(x[i]), s, global), Fp4Grid());
    }
  });
}

template <typename T>
void Nvfp4Dequantize(const uint8_t* codes, const uint8_t* scale_e4m3, T* y, int64_t rows, int64_t len, float global) {
  const float* fp4 = DecodeTable(ElemFormat::kFp4E2M1);
  const float* e4m3 = DecodeTable(ElemFormat::kFp8E4M3);
  ForEachGroup(rows, len, [&](int64_t k, int64_t off) {
    const float s = e4m3[scale_e4m3[k]];
    for (int64_t i = off; i < off + kNvfp4Group; ++i) y[i] = FromF32<T>(element::Nvfp4Dequant(fp4[codes[i] & 0xF], s, global));
  });
}

void Nvfp4FakeQuantRef(const float* x, float* y, int64_t rows, int64_t len, float global) {
  const FormatTraits& fp4 = Traits(ElemFormat::kFp4E2M1);
  const FormatTraits& e4m3 = Traits(ElemFormat::kFp8E4M3);
  const int64_t n = rows * len;
  if (!(global > 0.0f)) {
    double amax = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isnan(x[i])) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
    }
    const float a = static_cast<float>(amax);
    global = std::isinf(a) ? 1.0f : a / 2688.0f;
    if (global == 0.0f) global = std::numeric_limits<float>::epsilon();
  }
  for (int64_t off = 0; off < n; off += 16) {
    float amax = 0.0f;
    for (int64_t i = off; i < off + 16; ++i) {
      if (!std::isnan(x[i])) amax = std::max(amax, std::fabs(x[i]));
    }
    const float ratio = amax / (global * 6.0f);
    float s = e4m3.round_ref(std::isinf(ratio) ? e4m3.max : ratio);
    if (s == 0.0f || std::isnan(s)) s = 1.0f;
    const float step = s * global;
    for (int64_t i = off; i < off + 16; ++i) {
      const float v = std::isnan(x[i]) ? x[i] : fp4.round_ref(std::clamp(x[i] / step, -fp4.max, fp4.max));
      y[i] = (v * s) * global;
    }
  }
}

#define QUARK_INSTANTIATE_NVFP4(T)                                                                         \
  template float Nvfp4Amax<T>(const T*, int64_t);                                                           \
  template void Nvfp4BlockScales<T>(const T*, int64_t, int64_t, float, float*);                             \
  template void Nvfp4FakeQuant<T>(const T*, T*, int64_t, int64_t, float, const float*);                     \
  template void Nvfp4FakeQuantColumn<T>(const float*, float*, int64_t, float, const float*);                \
  template void Nvfp4Quantize<T>(const T*, uint8_t*, uint8_t*, int64_t, int64_t, float, const float*);       \
  template void Nvfp4Dequantize<T>(const uint8_t*, const uint8_t*, T*, int64_t, int64_t, float);

QUARK_INSTANTIATE_NVFP4(float)
QUARK_INSTANTIATE_NVFP4(c10::BFloat16)
QUARK_INSTANTIATE_NVFP4(c10::Half)
#undef QUARK_INSTANTIATE_NVFP4

}  // namespace quark::kernels
