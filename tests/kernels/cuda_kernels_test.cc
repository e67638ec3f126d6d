// Every CUDA kernel against the CPU kernel on the same inputs, bit for bit: fake quantization, codes and packing of
// the integer, small-float and MX formats, in float32 / bfloat16 / float16, on sizes 1, 17, 1025 and 4099 with ties,
// NaN, +-Inf, -0 and subnormals. Compiled and linked wherever nvcc is found; skips (saying so) without a device.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/affine_kernels.h"
#include "kernels/cpu/float_grid.h"
#include "kernels/cpu/float_kernels.h"
#include "kernels/cpu/format_traits.h"
#include "kernels/cpu/mx_kernels.h"
#include "kernels/cpu/pack_kernels.h"
#include "kernels/cuda/quant_cuda.h"
#include "tests/kernels/cuda_test_inputs.h"

namespace quark::testing {
namespace {

using kernels::ChannelLayout;
using kernels::ElemFormat;
using kernels::cuda::CudaElem;

constexpr CudaElem kElems[] = {CudaElem::kF32, CudaElem::kBF16, CudaElem::kF16};
// [outer, channels, inner]: per tensor, per element column (inner 1), per channel runs and groups, odd sizes.
constexpr ChannelLayout kLayouts[] = {{1, 1, 1}, {1, 1, 17}, {1, 17, 1}, {1, 1, 1025}, {3, 17, 1},
                                      {5, 7, 32}, {1, 33, 31}, {2, 4, 1025}, {1, 4099, 1}};

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda::CudaDeviceCount() == 0) {
      // On a machine that has a GPU (scripts/gpu/run.sh sets QUARK_EXPECT_CUDA there), not seeing it is a failure.
      if (std::getenv("QUARK_EXPECT_CUDA") != nullptr) {
        FAIL() << "QUARK_EXPECT_CUDA is set but no CUDA device is usable";
      }
      GTEST_SKIP() << "no CUDA device on this machine: the CUDA kernels were compiled and linked, not run";
    }
  }
};

// Calls f(T{}) with the CPU storage type of `elem`.
template <typename F>
void WithCpuType(CudaElem elem, F f) {
  if (elem == CudaElem::kBF16) {
    f(c10::BFloat16{});
  } else if (elem == CudaElem::kF16) {
    f(c10::Half{});
  } else {
    f(0.0f);
  }
}

void ExpectSameBytes(const std::vector<uint8_t>& cpu, const std::vector<uint8_t>& gpu, int64_t elem_bytes,
                     const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (cpu[i] != gpu[i]) {
      const size_t e = i / static_cast<size_t>(elem_bytes);
      ADD_FAILURE() << what << ": element " << e << " differs (byte " << i << ": cpu 0x" << std::hex
                    << static_cast<int>(cpu[i]) << ", gpu 0x" << static_cast<int>(gpu[i]) << ")";
      return;
    }
  }
}

void Sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }

std::string Describe(const ChannelLayout& l, CudaElem elem) {
  return ElemName(elem) + " [" + std::to_string(l.outer) + "," + std::to_string(l.channels) + "," +
         std::to_string(l.inner) + "]";
}

struct AffineParams {
  std::vector<float> scale, inv, zero;
};

AffineParams MakeAffineParams(int64_t channels, int qmin, int qmax, bool float_zero, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> s(0.01f, 0.5f);
  std::uniform_int_distribution<int> z(qmin, qmax);
  AffineParams p;
  for (int64_t c = 0; c < channels; ++c) {
    p.scale.push_back(s(rng));
    p.inv.push_back(1.0f / p.scale.back());
    const float zi = qmin < 0 ? 0.0f : static_cast<float>(z(rng));
    p.zero.push_back(float_zero ? zi + 0.37f : zi);
  }
  return p;
}

struct IntGrid {
  int qmin, qmax;
};
constexpr IntGrid kIntGrids[] = {{-128, 127}, {0, 255}, {-8, 7}, {0, 15}, {-2, 1}};

TEST_F(CudaKernelsTest, AffineFakeQuantAndCodesEqualTheCpu) {
  uint64_t seed = 1;
  for (const ChannelLayout& layout : kLayouts) {
    const int64_t n = layout.Numel();
    for (const IntGrid& grid : kIntGrids) {
      for (int round = 0; round < 3; ++round) {
        for (bool float_zero : {false, true}) {
          const AffineParams p = MakeAffineParams(layout.channels, grid.qmin, grid.qmax, float_zero, ++seed);
          const std::vector<float> values = KernelInputs(n, seed, p.scale[0]);
          DeviceBuffer scale = DeviceBuffer::From(p.scale), inv = DeviceBuffer::From(p.inv),
                       zero = DeviceBuffer::From(p.zero);
          kernels::AffineArgs cpu_args{p.scale.data(), p.zero.data(), grid.qmin, grid.qmax,
                                       static_cast<kernels::RoundMode>(round), float_zero};
          kernels::cuda::CudaAffineArgs gpu_args{layout.outer, layout.channels, layout.inner, scale.as<float>(),
                                                 inv.as<float>(), zero.as<float>(), grid.qmin, grid.qmax, round,
                                                 float_zero};
          for (CudaElem elem : kElems) {
            const std::string what = "affine " + Describe(layout, elem) + " q[" + std::to_string(grid.qmin) + "," +
                                     std::to_string(grid.qmax) + "] round " + std::to_string(round) +
                                     (float_zero ? " float zp" : "");
            const std::vector<uint8_t> x = StoreAs(values, elem);
            std::vector<uint8_t> y(x.size()), codes(static_cast<size_t>(n));
            WithCpuType(elem, [&](auto t) {
              using T = decltype(t);
              kernels::FakeQuantAffine(reinterpret_cast<const T*>(x.data()), reinterpret_cast<T*>(y.data()), layout,
                                       cpu_args);
              if (!float_zero && grid.qmin < 0) {
                kernels::QuantizeAffine(reinterpret_cast<const T*>(x.data()),
                                        reinterpret_cast<int8_t*>(codes.data()), layout, cpu_args);
              } else if (!float_zero) {
                kernels::QuantizeAffine(reinterpret_cast<const T*>(x.data()), codes.data(), layout, cpu_args);
              }
            });
            DeviceBuffer dx = DeviceBuffer::From(x), dy(x.size()), dcodes(static_cast<size_t>(n));
            ASSERT_EQ(kernels::cuda::FakeQuantAffineCuda(dx.get(), dy.get(), elem, gpu_args, nullptr), 0) << what;
            Sync();
            ExpectSameBytes(y, dy.Read<uint8_t>(y.size()), ElemBytes(elem), what);
            if (float_zero) continue;  // codes are stored with integer zero points only
            ASSERT_EQ(kernels::cuda::QuantizeAffineCuda(dx.get(), dcodes.as<uint8_t>(), elem, gpu_args, nullptr), 0);
            Sync();
            ExpectSameBytes(codes, dcodes.Read<uint8_t>(codes.size()), 1, what + " codes");
          }
        }
      }
    }
  }
}

constexpr ElemFormat kFloatFormats[] = {ElemFormat::kFp8E4M3, ElemFormat::kFp8E5M2, ElemFormat::kFp6E3M2,
                                        ElemFormat::kFp6E2M3, ElemFormat::kFp4E2M1};

TEST_F(CudaKernelsTest, FloatFormatFakeQuantAndCodesEqualTheCpu) {
  uint64_t seed = 100;
  for (const ChannelLayout& layout : kLayouts) {
    const int64_t n = layout.Numel();
    for (ElemFormat format : kFloatFormats) {
      const kernels::FormatTraits& traits = kernels::Traits(format);
      const kernels::GridConsts consts = kernels::MakeGrid(traits);
      const kernels::GridArgs grid{traits.mbits, traits.emin, traits.max};
      const kernels::GridCodeArgs code{consts.ebits, consts.mbits, consts.emin, consts.has_nan, consts.nan_code};
      const AffineParams p = MakeAffineParams(layout.channels, 0, 0, false, ++seed);
      const std::vector<float> values = KernelInputs(n, seed, p.scale[0] * traits.max / 64.0f);
      DeviceBuffer scale = DeviceBuffer::From(p.scale);
      kernels::cuda::CudaAffineArgs gpu_args{layout.outer, layout.channels, layout.inner, scale.as<float>(),
                                             nullptr, nullptr, 0, 0, 0, false};
      for (CudaElem elem : kElems) {
        const std::string what = std::string(traits.name) + " " + Describe(layout, elem);
        const std::vector<uint8_t> x = StoreAs(values, elem);
        std::vector<uint8_t> y(x.size()), codes(static_cast<size_t>(n));
        WithCpuType(elem, [&](auto t) {
          using T = decltype(t);
          kernels::FakeQuantFloat(reinterpret_cast<const T*>(x.data()), reinterpret_cast<T*>(y.data()), layout,
                                  p.scale.data(), format);
          kernels::QuantizeFloat(reinterpret_cast<const T*>(x.data()), codes.data(), layout, p.scale.data(), format);
        });
        DeviceBuffer dx = DeviceBuffer::From(x), dy(x.size()), dcodes(static_cast<size_t>(n));
        ASSERT_EQ(kernels::cuda::FakeQuantFloatCuda(dx.get(), dy.get(), elem, gpu_args, grid, nullptr), 0) << what;
        ASSERT_EQ(kernels::cuda::QuantizeFloatCuda(dx.get(), dcodes.as<uint8_t>(), elem, gpu_args, grid, code,
                                                   nullptr),
                  0);
        Sync();
        ExpectSameBytes(y, dy.Read<uint8_t>(y.size()), ElemBytes(elem), what);
        ExpectSameBytes(codes, dcodes.Read<uint8_t>(codes.size()), 1, what + " codes");
      }
    }
  }
}

struct MxShape {
  int64_t rows, len;
};
// Rows of whole 16-byte vectors (104, 4104, 64: the vectorized launch) and of odd lengths (the scalar one).
constexpr MxShape kMxShapes[] = {{1, 1}, {1, 17}, {3, 32}, {2, 100}, {1, 1025}, {4, 4099}, {2, 104}, {3, 4104},
                                 {1, 64}};

TEST_F(CudaKernelsTest, MxFakeQuantCodesAndScalesEqualTheCpu) {
  uint64_t seed = 300;
  std::vector<ElemFormat> elements(std::begin(kFloatFormats), std::end(kFloatFormats));
  elements.push_back(ElemFormat::kInt8);  // MXINT8
  for (const MxShape& shape : kMxShapes) {
    const int64_t n = shape.rows * shape.len;
    const int64_t blocks = shape.rows * kernels::MxBlocksPerRow(shape.len);
    for (ElemFormat element : elements) {
      const bool is_int = element == ElemFormat::kInt8;
      const kernels::FormatTraits& traits = kernels::Traits(is_int ? ElemFormat::kFp8E4M3 : element);
      const kernels::GridConsts consts = kernels::MakeGrid(traits);
      for (int mode = 0; mode < 3; ++mode) {
        for (int round = 0; round < (is_int ? 3 : 1); ++round) {
          // Blocks of ordinary values, and blocks so small (amax < 2^-121) that MXINT8 scales in two steps.
          for (float unit : {0.01f, 1e-38f}) {
            kernels::MxArgs cpu_args{element, static_cast<kernels::MxScaleMode>(mode),
                                     static_cast<kernels::RoundMode>(round)};
            kernels::cuda::CudaMxArgs gpu_args{shape.rows, shape.len, {traits.mbits, traits.emin, traits.max},
                                               is_int ? 6 : traits.mbits, is_int ? 0 : traits.emax, mode, is_int,
                                               round};
            const kernels::GridCodeArgs code{consts.ebits, consts.mbits, consts.emin, consts.has_nan,
                                             consts.nan_code};
            const std::vector<float> values = KernelInputs(n, ++seed, unit);
            for (CudaElem elem : kElems) {
              const std::string what = "mx " + std::string(is_int ? "int8" : traits.name) + " " + ElemName(elem) +
                                       " [" + std::to_string(shape.rows) + "," + std::to_string(shape.len) +
                                       "] mode " + std::to_string(mode) + " round " + std::to_string(round) +
                                       " unit " + std::to_string(unit);
              const std::vector<uint8_t> x = StoreAs(values, elem);
              std::vector<uint8_t> y(x.size()), codes(static_cast<size_t>(n)), e8m0(static_cast<size_t>(blocks));
              WithCpuType(elem, [&](auto t) {
                using T = decltype(t);
                kernels::MxFakeQuant(reinterpret_cast<const T*>(x.data()), reinterpret_cast<T*>(y.data()),
                                     shape.rows, shape.len, cpu_args, nullptr);
                kernels::MxQuantize(reinterpret_cast<const T*>(x.data()), codes.data(), e8m0.data(), shape.rows,
                                    shape.len, cpu_args);
              });
              DeviceBuffer dx = DeviceBuffer::From(x), dy(x.size()), dcodes(codes.size()), de8m0(e8m0.size());
              ASSERT_EQ(kernels::cuda::FakeQuantMxCuda(dx.get(), dy.get(), elem, gpu_args, nullptr), 0) << what;
              ASSERT_EQ(kernels::cuda::QuantizeMxCuda(dx.get(), dcodes.as<uint8_t>(), de8m0.as<uint8_t>(), elem,
                                                      gpu_args, code, nullptr),
                        0);
              Sync();
              ExpectSameBytes(y, dy.Read<uint8_t>(y.size()), ElemBytes(elem), what);
              ExpectSameBytes(codes, dcodes.Read<uint8_t>(codes.size()), 1, what + " codes");
              ExpectSameBytes(e8m0, de8m0.Read<uint8_t>(e8m0.size()), 1, what + " scales");
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaKernelsTest, PackingEqualsTheCpu) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t n : {8, 16, 24, 8 * 1025, 8 * 4099}) {
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    for (auto& c : codes) c = static_cast<uint8_t>(byte(rng));  // high nibbles set too: packing must mask them
    DeviceBuffer dcodes = DeviceBuffer::From(codes);
    // The two orders the exports use (constant-order kernels) and another (the run-time-order kernel).
    const kernels::Int4Order reversed = {7, 6, 5, 4, 3, 2, 1, 0};
    for (const kernels::Int4Order& order : {kernels::kInt4Reorder, kernels::kInt4Sequential, reversed}) {
      std::vector<int32_t> words(static_cast<size_t>(n / 8));
      kernels::PackInt4(codes.data(), n, order, words.data());
      int gpu_order[8];
      for (int i = 0; i < 8; ++i) gpu_order[i] = order[i];
      DeviceBuffer dwords(words.size() * 4);
      ASSERT_EQ(kernels::cuda::PackInt4Cuda(dcodes.as<uint8_t>(), n, gpu_order, dwords.as<int32_t>(), nullptr), 0);
      Sync();
      EXPECT_EQ(words, dwords.Read<int32_t>(words.size())) << "int4 n=" << n << " order[1]=" << order[1];
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(n / 2));
    kernels::PackFp4(codes.data(), n, bytes.data());
    DeviceBuffer dbytes(bytes.size());
    ASSERT_EQ(kernels::cuda::PackFp4Cuda(dcodes.as<uint8_t>(), n, dbytes.as<uint8_t>(), nullptr), 0);
    Sync();
    EXPECT_EQ(bytes, dbytes.Read<uint8_t>(bytes.size())) << "fp4 n=" << n;
  }
}

// Pointers into the middle of a buffer, `x` and `y` elements in (codes: bytes): alike (a scalar head, then the vector
// path), alike at a vector boundary, differently (all scalar), and in place (y == x; fake quantization only).
struct Offsets {
  int64_t x, y;
  bool in_place;
};
constexpr Offsets kOffsets[] = {{0, 0, false}, {1, 1, false}, {3, 3, false}, {4, 4, false}, {8, 8, false},
                                {1, 0, false}, {0, 5, false}, {2, 2, true},  {8, 8, true}};

std::string Describe(const Offsets& o) {
  return " offsets x " + std::to_string(o.x) + " y " + std::to_string(o.y) + (o.in_place ? " in place" : "");
}

// Runs gpu(x pointer, output pointer) with x stored o.x elements into one buffer and the output o.y elements into
// another (or over x), and compares the output with `want`.
template <typename F>
void ExpectAtOffsets(const std::vector<uint8_t>& x, int64_t x_bytes, const std::vector<uint8_t>& want,
                     int64_t out_bytes, const Offsets& o, const std::string& what, F gpu) {
  if (o.in_place && out_bytes != x_bytes) return;
  const size_t x_at = static_cast<size_t>(o.x * x_bytes), y_at = static_cast<size_t>(o.y * out_bytes);
  DeviceBuffer dx(x.size() + x_at), dy(want.size() + y_at);
  dx.Upload(x.data(), x.size(), x_at);
  ASSERT_EQ(gpu(dx.at(x_at), o.in_place ? dx.at(x_at) : dy.at(y_at)), 0) << what;
  Sync();
  ExpectSameBytes(want, o.in_place ? dx.Read<uint8_t>(want.size(), x_at) : dy.Read<uint8_t>(want.size(), y_at),
                  out_bytes, what + Describe(o));
}

constexpr ChannelLayout kOffsetLayouts[] = {{1, 1, 1},   {1, 1, 17}, {1, 17, 1},     {1, 1, 4099},
                                            {3, 7, 45},  {1, 1025, 1}, {2, 4, 1025}};

TEST_F(CudaKernelsTest, AffineAndFloatKernelsAtOffsetPointersEqualTheCpu) {
  uint64_t seed = 500;
  const ElemFormat fp8 = ElemFormat::kFp8E4M3;
  const kernels::FormatTraits& traits = kernels::Traits(fp8);
  const kernels::GridConsts consts = kernels::MakeGrid(traits);
  const kernels::GridArgs grid{traits.mbits, traits.emin, traits.max};
  const kernels::GridCodeArgs code{consts.ebits, consts.mbits, consts.emin, consts.has_nan, consts.nan_code};
  for (const ChannelLayout& layout : kOffsetLayouts) {
    const int64_t n = layout.Numel();
    const AffineParams p = MakeAffineParams(layout.channels, -128, 127, false, ++seed);
    const std::vector<float> values = KernelInputs(n, seed, p.scale[0]);
    DeviceBuffer scale = DeviceBuffer::From(p.scale), inv = DeviceBuffer::From(p.inv), zero = DeviceBuffer::From(p.zero);
    const kernels::AffineArgs cpu_args{p.scale.data(), p.zero.data(), -128, 127, kernels::RoundMode::kHalfEven, false};
    const kernels::cuda::CudaAffineArgs gpu_args{layout.outer, layout.channels, layout.inner, scale.as<float>(),
                                                 inv.as<float>(), zero.as<float>(), -128, 127, 0, false};
    for (CudaElem elem : kElems) {
      const std::vector<uint8_t> x = StoreAs(values, elem);
      const int64_t eb = ElemBytes(elem);
      std::vector<uint8_t> fake(x.size()), codes(static_cast<size_t>(n)), fp8_fake(x.size()),
          fp8_codes(static_cast<size_t>(n));
      WithCpuType(elem, [&](auto t) {
        using T = decltype(t);
        const T* in = reinterpret_cast<const T*>(x.data());
        kernels::FakeQuantAffine(in, reinterpret_cast<T*>(fake.data()), layout, cpu_args);
        kernels::QuantizeAffine(in, reinterpret_cast<int8_t*>(codes.data()), layout, cpu_args);
        kernels::FakeQuantFloat(in, reinterpret_cast<T*>(fp8_fake.data()), layout, p.scale.data(), fp8);
        kernels::QuantizeFloat(in, fp8_codes.data(), layout, p.scale.data(), fp8);
      });
      for (const Offsets& o : kOffsets) {
        const std::string what = Describe(layout, elem);
        ExpectAtOffsets(x, eb, fake, eb, o, "int8 " + what, [&](const void* in, void* out) {
          return kernels::cuda::FakeQuantAffineCuda(in, out, elem, gpu_args, nullptr);
        });
        ExpectAtOffsets(x, eb, codes, 1, o, "int8 codes " + what, [&](const void* in, void* out) {
          return kernels::cuda::QuantizeAffineCuda(in, static_cast<uint8_t*>(out), elem, gpu_args, nullptr);
        });
        ExpectAtOffsets(x, eb, fp8_fake, eb, o, "fp8 " + what, [&](const void* in, void* out) {
          return kernels::cuda::FakeQuantFloatCuda(in, out, elem, gpu_args, grid, nullptr);
        });
        ExpectAtOffsets(x, eb, fp8_codes, 1, o, "fp8 codes " + what, [&](const void* in, void* out) {
          return kernels::cuda::QuantizeFloatCuda(in, static_cast<uint8_t*>(out), elem, gpu_args, grid, code, nullptr);
        });
      }
    }
  }
}

TEST_F(CudaKernelsTest, MxKernelsAtOffsetPointersEqualTheCpu) {
  uint64_t seed = 600;
  for (const MxShape& shape : {MxShape{2, 104}, MxShape{3, 4104}, MxShape{1, 17}, MxShape{2, 100}}) {
    const int64_t n = shape.rows * shape.len;
    for (ElemFormat element : {ElemFormat::kFp4E2M1, ElemFormat::kInt8}) {
      const bool is_int = element == ElemFormat::kInt8;
      const kernels::FormatTraits& traits = kernels::Traits(is_int ? ElemFormat::kFp8E4M3 : element);
      const kernels::GridConsts consts = kernels::MakeGrid(traits);
      const kernels::GridCodeArgs code{consts.ebits, consts.mbits, consts.emin, consts.has_nan, consts.nan_code};
      const kernels::MxArgs cpu_args{element, kernels::MxScaleMode::kEven, kernels::RoundMode::kHalfEven};
      const kernels::cuda::CudaMxArgs gpu_args{shape.rows, shape.len, {traits.mbits, traits.emin, traits.max},
                                               is_int ? 6 : traits.mbits, is_int ? 0 : traits.emax, 0, is_int, 0};
      const std::vector<float> values = KernelInputs(n, ++seed, 0.01f);
      for (CudaElem elem : kElems) {
        const std::vector<uint8_t> x = StoreAs(values, elem);
        const int64_t eb = ElemBytes(elem);
        std::vector<uint8_t> fake(x.size()), codes(static_cast<size_t>(n)),
            e8m0(static_cast<size_t>(shape.rows * kernels::MxBlocksPerRow(shape.len)));
        WithCpuType(elem, [&](auto t) {
          using T = decltype(t);
          const T* in = reinterpret_cast<const T*>(x.data());
          kernels::MxFakeQuant(in, reinterpret_cast<T*>(fake.data()), shape.rows, shape.len, cpu_args, nullptr);
          kernels::MxQuantize(in, codes.data(), e8m0.data(), shape.rows, shape.len, cpu_args);
        });
        const std::string what = std::string(is_int ? "mxint8 " : "mxfp4 ") + ElemName(elem) + " [" +
                                 std::to_string(shape.rows) + "," + std::to_string(shape.len) + "]";
        for (const Offsets& o : kOffsets) {
          ExpectAtOffsets(x, eb, fake, eb, o, what, [&](const void* in, void* out) {
            return kernels::cuda::FakeQuantMxCuda(in, out, elem, gpu_args, nullptr);
          });
          DeviceBuffer de8m0(e8m0.size());
          ExpectAtOffsets(x, eb, codes, 1, o, what + " codes", [&](const void* in, void* out) {
            return kernels::cuda::QuantizeMxCuda(in, static_cast<uint8_t*>(out), de8m0.as<uint8_t>(), elem, gpu_args,
                                                 code, nullptr);
          });
          if (!o.in_place) ExpectSameBytes(e8m0, de8m0.Read<uint8_t>(e8m0.size()), 1, what + " scales" + Describe(o));
        }
      }
    }
  }
}

TEST_F(CudaKernelsTest, PackingAtOffsetPointersEqualsTheCpu) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t n : {8, 24, 8 * 1025}) {
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    for (auto& c : codes) c = static_cast<uint8_t>(byte(rng));
    std::vector<int32_t> words(static_cast<size_t>(n / 8));
    kernels::PackInt4(codes.data(), n, kernels::kInt4Reorder, words.data());
    std::vector<uint8_t> word_bytes(words.size() * 4), fp4(static_cast<size_t>(n / 2));
    std::memcpy(word_bytes.data(), words.data(), word_bytes.size());
    kernels::PackFp4(codes.data(), n, fp4.data());
    int order[8];
    for (int i = 0; i < 8; ++i) order[i] = kernels::kInt4Reorder[i];
    // Offsets in units: int4 8 codes -> 1 word, fp4 2 codes -> 1 byte.
    for (const Offsets& o : {Offsets{0, 0, false}, Offsets{1, 1, false}, Offsets{2, 2, false}, Offsets{1, 0, false},
                             Offsets{0, 3, false}, Offsets{8, 8, false}}) {
      const std::string what = "n " + std::to_string(n);
      ExpectAtOffsets(codes, 8, word_bytes, 4, o, "int4 " + what, [&](const void* in, void* out) {
        return kernels::cuda::PackInt4Cuda(static_cast<const uint8_t*>(in), n, order, static_cast<int32_t*>(out),
                                           nullptr);
      });
      ExpectAtOffsets(codes, 2, fp4, 1, o, "fp4 " + what, [&](const void* in, void* out) {
        return kernels::cuda::PackFp4Cuda(static_cast<const uint8_t*>(in), n, static_cast<uint8_t*>(out), nullptr);
      });
    }
  }
}

}  // namespace
}  // namespace quark::testing
